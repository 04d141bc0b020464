/*
 * A stand-in libnvidia-ml.so.1 for TestOpenLoadsTheLibraryAtRunTime: the
 * three entry points Open calls on a machine without GPUs. It initialises,
 * counts no device and shuts down, so Open fails with "no GPU", which only
 * a library that was found and loaded can say.
 */
int nvmlInit_v2(void) { return 0; }

int nvmlDeviceGetCount_v2(unsigned int *count) {
	*count = 0;
	return 0;
}

int nvmlShutdown(void) { return 0; }
