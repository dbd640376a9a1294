"""The rules that turn gpu_host facts into findings of the catalog (findings/). Pure: nothing here does I/O."""
