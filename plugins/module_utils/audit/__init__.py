"""Reading a host: the Source seam (live system or a saved capture), the gatherers,
and the audit that assembles the gpu_host facts."""
