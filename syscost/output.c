/*
 * output.c: syscost's two outputs, one line (--format table) or one JSON
 * object (the default; docs/syscost.md has the schema), from a finished run.
 * Kept apart from the measurement as timewrite keeps print_row and
 * print_json: nothing here times anything.
 */
#include <stdio.h>
#include <unistd.h>

#include "json_out.h"
#include "ops.h"
#include "chain.h"
#include "output.h"
#include "wall.h"
#include "tw_cli.h"
#include "tw_stats.h"
#include "tw_syscall.h"

void
print_table(const struct opts *o, const struct run *r)
{
	double med, lo, hi;

	tw_summarize(r->samples_ns, r->measured, &med, &lo, &hi);
	printf("%d-%s %s", (int)sizeof(long) * 8, tw_mechanism, op_names[o->op]);
	if (OP_WRITES(o->op))
		printf(" size %ld", o->size);
	if (o->shape != SHAPE_RET)
		printf(" shape %s", shape_names[o->shape]);
	printf(": %.1f ns/call median (min %.1f, max %.1f) over %ld batches of %ld calls"
	    " (%ld disturbed, %ld redone);"
	    " empty loop %.2f ns/call subtracted; clock %s",
	    med, lo, hi, r->measured, r->calls, r->ndisturbed,
	    r->redone, r->loop_med, clk == CLK_TSC ? "tsc" : "monotonic");
	if (clk == CLK_TSC)
		printf(" at %.4f GHz", tsc_hz / 1e9);
	printf(", cpu %ld, sched %s\n", r->cpu, r->sched);
	tw_flush_stdout();
}

/* The /proc/self/status lines each part of the JSON reports. */
static const char *const speculation_keys[] = { "Speculation", NULL };
static const char *const wall_keys[] = { "Seccomp", "NoNewPrivs", NULL };

void
print_json(const struct opts *o, const struct run *r)
{
	printf("{\"variant\":\"%d-%s\",\"bits\":%d,\"abi\":\"%s\",\"pid\":%ld,\"mechanism\":",
	    (int)sizeof(long) * 8, tw_mechanism, (int)sizeof(long) * 8, ABI_NAME, (long)getpid());
	json_string(tw_mechanism);
	printf(",\"op\":\"%s\",\"shape\":\"%s\",", op_names[o->op], shape_names[o->shape]);
	if (!OP_WRITES(o->op))
		printf("\"size\":null,\"file\":null,\"file_bytes\":null,");
	else {
		printf("\"size\":%ld,\"file\":", o->size);
		json_string(r->file);
		if (r->file_bytes >= 0)
			printf(",\"file_bytes\":%lld,", r->file_bytes);
		else
			printf(",\"file_bytes\":null,");
	}
	if (r->lo == r->hi)
		printf("\"expect\":%ld,", r->lo);
	else
		printf("\"expect\":null,");
	printf("\"accept\":[%ld,%ld],\"clock\":\"%s\",\"clock_why\":", r->lo, r->hi,
	    clk == CLK_TSC ? "tsc" : "monotonic");
	json_string(r->clock_why);
	if (clk == CLK_TSC)
		printf(",\"tsc_hz\":%.0f,\"tsc_hz_source\":\"%s\"", tsc_hz,
		    o->tsc_hz > 0 ? "given" : "measured");
	else
		printf(",\"tsc_hz\":null,\"tsc_hz_source\":null");
	printf(",\"sched\":\"%s\",\"sched_why\":", r->sched);
	json_string(r->sched_why);
	printf(",\"speculation\":{\"asked\":");
	if (o->speculation == SPEC_NONE)
		printf("null");
	else
		json_string(spec_names[o->speculation]);
	printf(",\"status\":");
	status_json(speculation_keys);
	printf("},\"wall\":{\"seccomp\":");
	if (o->seccomp == NULL)
		printf("null");
	else
		json_string(o->seccomp);
	printf(",\"seccomp_times\":%ld,\"seccomp_flags\":%ld,\"errno\":",
	    o->seccomp != NULL ? o->seccomp_times : 0, o->seccomp_flags);
	if (o->expect_errno)
		printf("%ld", o->expect_errno);
	else
		printf("null");
	printf(",\"status\":");
	status_json(wall_keys);
	printf("}");
	printf(",\"nr\":%ld,\"cpu\":%ld,\"calls_per_batch\":%ld,\"empty_calls_per_batch\":%ld,"
	    "\"batches\":%ld,\"max_redo\":%ld,\"redone\":%ld,\"warmup_ms\":%g,",
	    r->nr, r->cpu, r->calls, r->empty_calls, o->batches, o->max_redo, r->redone, o->warmup_ms);
	json_arrays(r->measured, 4, "loop_ns_per_call", r->loop_ns,
	    "samples_ns", r->samples_ns, "raw_ns", r->raw_ns,
	    "offcpu_ns_per_call", r->offcpu_ns,
	    "chain_ns_per_step", r->chain_ns, (char *)NULL);
	printf(",\"chain_cycles_per_step\":%d", CHAIN_CYCLES);
	printf(",\"offcpu_bracket_ns\":%.1f,", r->bracket_ns);
	json_int_array("nivcsw", r->nivcsw, r->measured);
	putchar(',');
	if (r->have_steal)
		json_int_array("steal_ticks", r->steal, r->measured);
	else
		printf("\"steal_ticks\":null");
	putchar(',');
	if (r->have_irqs)
		json_int_array("irqs", r->irqs, r->measured);
	else
		printf("\"irqs\":null");
	putchar(',');
	json_bool_array("disturbed", r->disturbed, r->measured);
	printf(",\"errors\":0}\n");
	tw_flush_stdout();
}
