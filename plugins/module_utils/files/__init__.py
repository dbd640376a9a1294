"""Files the controller writes: reports named after hosts, written whole or not at all."""
