"""Build of the optional compiled row encoder (loader/_native.c); everything else is in
pyproject.toml. Without a C compiler the install still succeeds and loader.encode uses its
numpy path (README, "Native encoder")."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "loader._native",
            sources=["loader/_native.c"],
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wextra"],
            optional=True,
        )
    ]
)
