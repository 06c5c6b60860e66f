# variants/rows.awk: the mechanism registry's rows, as the Makefile reads them.
#
#   awk -f variants/rows.awk variants/registry
#
# One line per variant: bits:abi:mechanism:write:object:object...  where write
# is "w" when the variant's ops (groups expanded) include write-file, so that
# timewrite is built for it, and "-" otherwise.  `ops NAME = ...` lines define
# operation groups and are not variants.  This is the only reader of the
# registry outside Python (twtools.machine.registry, which validates every
# column); tests/test_registry_readers.py checks that the two agree.
#
# A line that does not have the nine columns stops the build: the message names
# it, and the exit status is 1 (the Makefile checks .SHELLSTATUS).

{ sub(/#.*/, "") }
!NF { next }

$1 == "ops" {
	groups[$2] = $4
	next
}

NF < 9 {
	printf "variants/registry:%d: expected variant, abi, entry, bytes, needs, ops, shapes, seen-as and objects\n", FNR > "/dev/stderr"
	bad = 1
	exit 1
}

{
	dash = index($1, "-")
	bits = substr($1, 1, dash - 1)
	mech = substr($1, dash + 1)
	# The ops column, each group replaced by its operations.
	n = split($6, o, ",")
	ops = ""
	for (i = 1; i <= n; i++)
		ops = ops "," (o[i] in groups ? groups[o[i]] : o[i])
	write = ((ops ",") ~ /,write-file,/) ? "w" : "-"
	row = bits ":" $2 ":" mech ":" write
	for (i = 9; i <= NF; i++)
		row = row ":" $i
	print row
}

END { if (bad) exit 1 }
