/*
 * cpu.h: where a timing program runs.  syscost and legs pin themselves to one
 * CPU before they calibrate or read a clock, so that every reading comes from
 * one core's TSC and the scheduler does not move the loop between readings.
 */
#ifndef SYSCOST_CPU_H
#define SYSCOST_CPU_H

/* The last CPU this process may run on (the default of --cpu). */
long last_allowed_cpu(void);
/* The first: where the noisy neighbour (neighbour.c) runs by default, away from syscost. */
long first_allowed_cpu(void);
/* Run this process on CPU `cpu` only; exits with the reason when it cannot. */
void pin_cpu(long cpu);

#endif
