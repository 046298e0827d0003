# check_perf.awk - checks a ccl-perf or mpi-bench table (awk -f check_perf.awk LOG):
# every data row must report 0 in each "#wrong" column, and at least one row
# must exist. With -c 1 checking is on, so "N/A" is a failure too, except
# where the whole placement is "N/A" (time too): ccl-perf prints that for the
# in-place half of alltoall and sendrecv, which have no in-place form. Several
# tables in one log (ccl-perf -C a,b,...) are checked each under its own
# header. With -v na_ok=1, N/A is also accepted in the last (in-place)
# #wrong column whatever its time says. Exit status 0 when everything is
# right.
/^# (ccl-perf|mpi-bench):? / {
    coll = $3
    sub(/[,:]$/, "", coll)
    next
}
/^#/ && /#wrong/ {
    n = 0; nw = 0
    for (i = 1; i <= NF; i++) {
        if ($i == "#") continue
        n++
        if ($i == "#wrong") wcol[++nw] = n
    }
    ncols = n
    next
}
/^#/ { next }
nw > 0 && NF == ncols && $1 ~ /^[0-9]+$/ {
    rows++
    for (k = 1; k <= nw; k++) {
        v = $(wcol[k])
        if (v == "0") continue
        if (v == "N/A" && $(wcol[k] - 3) == "N/A") continue # time N/A: no such placement
        if (v == "N/A" && na_ok && k == nw && nw > 1) continue
        printf "perf check: %s row with %s bytes has #wrong = %s\n", coll, $1, v
        bad++
    }
}
END {
    if (nw == 0) { print "perf check: no header with a #wrong column"; exit 1 }
    if (rows == 0) { print "perf check: no result rows"; exit 1 }
    if (bad) exit 1
    printf "perf check: %d rows, all #wrong 0\n", rows
}
