# Sourced by scripts/quickstart.sh and scripts/mpich-lane.sh.
#
# count_test_results DIR: sets pass, fail, skip and total from the automake
# result files (*.trs) under DIR, leaving out DIR/build (other lanes' builds).
# A result other than PASS or SKIP counts as a failure.
count_test_results() {
    pass=0 fail=0 skip=0 total=0
    local trs
    for trs in $(find "$1" -path "$1/build" -prune -o -name '*.trs' -print); do
        total=$((total + 1))
        case $(sed -n 's/^:test-result: //p' "$trs") in
            PASS) pass=$((pass + 1)) ;;
            SKIP) skip=$((skip + 1)) ;;
            *) fail=$((fail + 1)) ;;
        esac
    done
}

# show_failed_logs DIR [LINES]: the last LINES (default 60) lines of the log
# of every test under DIR (DIR/build left out) whose result is not PASS or
# SKIP, so that a CI failure can be read from CI's output alone.
show_failed_logs() {
    local trs log
    for trs in $(find "$1" -path "$1/build" -prune -o -name '*.trs' -print); do
        case $(sed -n 's/^:test-result: //p' "$trs") in
            PASS | SKIP) ;;
            *)
                log=${trs%.trs}.log
                echo "---- last ${2:-60} lines of $log ----"
                tail -n "${2:-60}" "$log" 2>/dev/null || echo "(no log)"
                ;;
        esac
    done
}
