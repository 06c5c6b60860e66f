/*
 * tracer.h	What walls/tracer.bpf.c and its loader walls/tracerbpf.c share: the maps'
 *		sizes and the histogram's shape.
 */
#ifndef TW_WALLS_TRACER_H
#define TW_WALLS_TRACER_H

#define TRACER_NRS	1024	/* calls counted per number below this; the rest in the last */
#define TRACER_SLOTS	32	/* log2 buckets of a call's ns, entry to exit */
#define TRACER_THREADS	65536	/* threads with a call in flight */

#endif
