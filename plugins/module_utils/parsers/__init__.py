"""Pure parsers, one file per tool output: text or bytes in, typed data out.
They import nothing but their common helpers."""
