/* runtime/steps/command_step.h - command steps (command_step.c): plan steps run by a tool rather
 * than an agent (command, file_writer, http_call). Not to be confused with the executor
 * interface (executor.h), through which the engine hands every step to be run. */
#ifndef WEFT_RUNTIME_COMMAND_STEP_H
#define WEFT_RUNTIME_COMMAND_STEP_H

#include "runtime/run/run.h"

/* Run a command, file_writer or http_call step with its span, evaluation and reward. Sets the
 * step's final status and saves it (run services). */
void weft__command_step(struct run *run, size_t index);

#endif /* WEFT_RUNTIME_COMMAND_STEP_H */
