//! By-reference data printed as DTrace prints it (`dt_print_bytes`): bytes that look like a string
//! (printable characters, then only NULs) print as a string; anything else prints as a hex dump with its
//! `0 1 2 ... f  0123456789abcdef` header line, 16 bytes per row, non-printables shown as `.`.

fn printable(c: u8) -> bool {
    (0x20..=0x7e).contains(&c) || matches!(c, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x08 | 0x07)
}

/// The hex dump form.
pub fn hexdump(out: &mut Vec<u8>, b: &[u8]) {
    if b.is_empty() {
        return;
    }
    let margin = "     ";
    out.push(b'\n');
    out.extend_from_slice(margin.as_bytes());
    out.extend_from_slice(b"      ");
    for c in b"0123456789abcdef" {
        out.extend_from_slice(b"  ");
        out.push(*c);
    }
    out.extend_from_slice(b"  0123456789abcdef\n");
    for (row, chunk) in b.chunks(16).enumerate() {
        out.extend_from_slice(format!("{margin}{:5x}:", row * 16).as_bytes());
        for c in chunk {
            out.extend_from_slice(format!(" {c:02x}").as_bytes());
        }
        for _ in chunk.len()..16 {
            out.extend_from_slice(b"   ");
        }
        out.extend_from_slice(b"  ");
        for &c in chunk {
            out.push(if (b' '..=b'~').contains(&c) { c } else { b'.' });
        }
        out.push(b'\n');
    }
}

/// Prints `b` as a string when it looks like one, else as a hex dump. `width` is the column width of
/// the string form (negative: left-justified after two spaces); `raw` forces the dump.
pub fn print_bytes(out: &mut Vec<u8>, b: &[u8], width: i32, quiet: bool, raw: bool) {
    if b.is_empty() {
        return;
    }
    if !raw {
        let mut i = 0;
        while i < b.len() && printable(b[i]) {
            i += 1;
        }
        if i == b.len() {
            // All printable and no terminating NUL: still a string.
            let w = width.unsigned_abs() as usize;
            out.extend_from_slice(b"  ");
            out.extend_from_slice(b);
            out.resize(out.len() + w.saturating_sub(b.len()), b' ');
            return;
        }
        if b[i] == 0 && i > 0 && b[i + 1..].iter().all(|&c| c == 0) {
            let s = &b[..i];
            if quiet {
                out.extend_from_slice(s);
            } else {
                out.push(b' ');
                let w = width.unsigned_abs() as usize;
                let pad = w.saturating_sub(s.len());
                if width < 0 {
                    out.push(b' ');
                    out.extend_from_slice(s);
                    out.resize(out.len() + pad, b' ');
                } else {
                    out.resize(out.len() + pad, b' ');
                    out.extend_from_slice(s);
                }
            }
            return;
        }
    }
    hexdump(out, b);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(b: &[u8], width: i32, quiet: bool, raw: bool) -> String {
        let mut v = Vec::new();
        print_bytes(&mut v, b, width, quiet, raw);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn strings_print_as_strings() {
        assert_eq!(
            p(b"hello\0\0\0", -33, false, false),
            format!("  hello{}", " ".repeat(28))
        );
        assert_eq!(p(b"hello\0\0\0", -33, true, false), "hello");
        assert_eq!(p(b"ab\0", 5, false, false), "    ab");
    }

    #[test]
    fn binary_prints_as_dump() {
        let got = p(&[0x00, 0x01, b'A', 0xff], -33, false, false);
        let want = "\n             0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f  0123456789abcdef\n         0: 00 01 41 ff                                      ..A.\n";
        assert_eq!(got, want);
        // a string followed by more non-NUL data is binary
        assert!(p(b"ab\0c", -33, false, false).starts_with('\n'));
    }
}
