#!/usr/bin/env bash
# Nightly import: run `spanner-loader load --config job.toml`, keep its JSON report, and turn
# the loader's exit code into what a scheduler (cron, Cloud Run jobs) should see.
#
#   0  every row written               -> exit 0
#   3  loaded, some rows rejected      -> warn on stderr, exit 0 (NIGHTLY_STRICT=1: exit 3)
#   4  stopped at max-bad-rows         -> fail loudly, exit 4
#   1  the load failed                 -> fail loudly, exit 1
#   2  bad configuration or source     -> fail loudly, exit 2
#   5  interrupted (SIGTERM, timeout)  -> fail, exit 5; the next run resumes from the checkpoint
#   7  another run holds the job       -> warn, exit 75 (as the flock below): nothing was done
#   8  loaded, deferred index not back -> fail loudly, exit 8 (the error names it)
#
# Environment (all optional):
#   NIGHTLY_CONFIG       job file                               [job.toml next to this script]
#   NIGHTLY_REPORT_DIR   where reports are kept                 [reports/ next to this script]
#   NIGHTLY_REPORT_URI   also copy them to gs://bucket/prefix/ (Cloud Run's disk is not kept)
#   NIGHTLY_KEEP_DAYS    delete local reports older than this (days) [60]
#   NIGHTLY_STRICT       1: rejected rows fail the job too
#   NIGHTLY_ALERT_CMD    command that receives a failure or warning message on stdin
#                        (e.g. `mail -s "orders import" ops@example.com`)
#   SPANNER_LOADER       the loader command                     [spanner-loader]
# Extra arguments are passed to `spanner-loader load` and override job.toml, e.g.
#   ./nightly.sh --restart        (load every file again, forgetting the checkpoints)
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
config="${NIGHTLY_CONFIG:-$here/job.toml}"
report_dir="${NIGHTLY_REPORT_DIR:-$here/reports}"
loader="${SPANNER_LOADER:-spanner-loader}"
python="${PYTHON:-python3}"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
job="$(basename "$config" .toml)"
report="$report_dir/$job-$stamp.json"
rejects="$report_dir/$job-$stamp.rejects.jsonl"

# Routine lines go to stdout, warnings and failures to stderr: cron mails only stderr when
# stdout is redirected to a log file, Cloud Logging records stderr as errors.
log() { printf '%s nightly[%s]: %s\n' "$(date -u +%FT%TZ)" "$job" "$*"; }

alert() {
    log "$*" >&2
    if [[ -n "${NIGHTLY_ALERT_CMD:-}" ]]; then
        printf '%s\n' "$*" | bash -c "$NIGHTLY_ALERT_CMD" || log "alert command failed" >&2
    fi
}

# One field of the JSON report ("" when there is no report, e.g. a configuration error).
field() {
    [[ -s "$report" ]] || return 0
    "$python" -c 'import json, sys; v = json.load(open(sys.argv[1])).get(sys.argv[2]); print("" if v is None else v)' \
        "$report" "$1" 2>/dev/null || true
}

keep_reports() {
    [[ -n "${NIGHTLY_REPORT_URI:-}" ]] || return 0
    local f
    for f in "$report" "$rejects"; do
        [[ -s "$f" ]] || continue
        # google-cloud-storage comes with spanner-loader, so no gcloud is needed in the image.
        "$python" - "$f" "${NIGHTLY_REPORT_URI%/}/$(basename "$f")" <<'PY' || alert "could not copy $f to $NIGHTLY_REPORT_URI"
import sys
from google.cloud import storage
src, dst = sys.argv[1], sys.argv[2]
bucket, _, name = dst[len("gs://"):].partition("/")
storage.Client().bucket(bucket).blob(name).upload_from_filename(src)
PY
    done
}

prune_reports() {
    find "$report_dir" -maxdepth 1 -name "$job-*.json*" -mtime "+${NIGHTLY_KEEP_DAYS:-60}" \
        -delete 2>/dev/null || true
}

mkdir -p "$report_dir" || { alert "cannot create $report_dir"; exit 2; }

# Two nightly runs of one job must not overlap (a slow night, a manual run): the second leaves.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$report_dir/.$job.lock"
    if ! flock -n 9; then
        alert "FAILED: the previous run of $job is still running; not starting another"
        exit 75
    fi
fi

log "starting: $loader load --config $config $*"
"$loader" load --config "$config" --report "$report" --rejects "$rejects" "$@"
rc=$?
keep_reports
prune_reports

written="$(field rows_written)"
rejected="$(field rows_rejected)"
before="$(field rows_rejected_before)"  # by the earlier run this one resumed
error="$(field error)"
case "$rc" in
    0)
        log "ok: ${written:-0} rows written; report $report"
        exit 0
        ;;
    3)
        alert "WARNING: ${written:-0} rows written, ${rejected:-?} rows rejected (${before:-0} more by an earlier run); see $rejects (report $report)"
        [[ "${NIGHTLY_STRICT:-0}" == 1 ]] && exit 3
        exit 0
        ;;
    4)
        alert "FAILED: stopped after more than the allowed bad rows (${rejected:-?} rejected, ${written:-0} written before it stopped); see $rejects and $report${error:+: $error}"
        exit 4
        ;;
    5)
        alert "FAILED: interrupted after ${written:-0} rows; the next run resumes from the checkpoint (report $report)"
        exit 5
        ;;
    2)
        alert "FAILED: configuration or source error (exit 2); see the error above${error:+: $error}"
        exit 2
        ;;
    7)
        # another run of the job (another machine: flock does not reach it) is loading it
        alert "SKIPPED: another run of $job holds it${error:+: $error}; nothing was loaded"
        exit 75
        ;;
    8)
        alert "FAILED: rows loaded, but an index or foreign key deferred by the load is not back${error:+: $error}; report $report"
        exit 8
        ;;
    *)
        alert "FAILED: the load failed (exit $rc)${error:+: $error}; report $report. Re-running resumes from the checkpoint."
        exit "$rc"
        ;;
esac
