# Sourced by scripts/quickstart.sh and scripts/mpi-lane.sh.

# test_results DIR: "RESULT TRS" for every automake result file (*.trs)
# under DIR, leaving out DIR/build (other lanes' builds); NONE where a
# file names no result.
test_results() {
    local trs result
    for trs in $(find "$1" -path "$1/build" -prune -o -name '*.trs' -print); do
        result=$(sed -n 's/^:test-result: //p' "$trs")
        echo "${result:-NONE} $trs"
    done
}

# count_test_results DIR: sets pass, fail, skip and total from DIR's
# results.  A result other than PASS or SKIP counts as a failure.
count_test_results() {
    pass=0 fail=0 skip=0 total=0
    local result trs
    while read -r result trs; do
        total=$((total + 1))
        case $result in
            PASS) pass=$((pass + 1)) ;;
            SKIP) skip=$((skip + 1)) ;;
            *) fail=$((fail + 1)) ;;
        esac
    done < <(test_results "$1")
}

# show_failed_logs DIR [LINES]: the last LINES (default 60) lines of the log
# of every test under DIR whose result is not PASS or SKIP, so that a CI
# failure can be read from CI's output alone.
show_failed_logs() {
    local result trs
    while read -r result trs; do
        case $result in
            PASS | SKIP) ;;
            *)
                echo "---- last ${2:-60} lines of ${trs%.trs}.log ----"
                tail -n "${2:-60}" "${trs%.trs}.log" 2>/dev/null || echo "(no log)"
                ;;
        esac
    done < <(test_results "$1")
}
