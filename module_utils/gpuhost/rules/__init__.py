"""The findings catalog and the rules that turn gpu_host facts into findings. Pure: nothing here does I/O."""
