/*
 * speculation.h: --speculation, a per-process speculation mitigation switched
 * on (prctl PR_SET_SPECULATION_CTRL, PR_SPEC_DISABLE) before measuring, so that
 * one session can alternate it.  The Speculation* lines of /proc/self/status
 * afterwards, which say what was in force, are output.c's (wall.h's status_json).
 */
#ifndef SYSCOST_SPECULATION_H
#define SYSCOST_SPECULATION_H

/* PR_SET_SPECULATION_CTRL's controls that --speculation can switch. */
enum spec { SPEC_NONE, SPEC_SSBD, SPEC_IB, SPEC_ALL };

/* --speculation's words, by enum spec (NULL for SPEC_NONE). */
extern const char *const spec_names[4];

/*
 * Disable the speculation s names for this process, or exit 77
 * (TW_EXIT_UNSUPPORTED) saying why the kernel will not.
 */
void speculation_apply(enum spec s);

#endif
