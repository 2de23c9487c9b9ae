/* `ordo demo`: the command's main job (demo.c). */
#ifndef ORDO_TOOL_DEMO_H
#define ORDO_TOOL_DEMO_H

/* Runs the pipeline with the options after "demo"; the process exit code. */
int demo_main(int argc, char **argv);

#endif
