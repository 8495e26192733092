//! Formats one million `printf("%d %s\n", ...)` records and writes them to /dev/null.
fn main() {}
