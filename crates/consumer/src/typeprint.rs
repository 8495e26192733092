//! `print()` of a pointer, as DTrace for Linux prints it: the address and ` = *`, then the object it
//! points to (recorded at the probe) walked by the type description the compiler left in
//! `Program::print_types`, in the typed-data style of BTF dumps: `(type)value`; struct and union
//! members one a line as `.name = (type)value,`, one space deeper a level under a 44-column margin;
//! members whose value is zero left out; character arrays element by element up to their NUL; enums
//! by name; pointers in hex. With `printsize` set, the object is shown up to that many bytes and a
//! `...` line stands for the rest.

use dtrace_dif::program::{PrintKind, PrintType};

use crate::error::{ConsumerError, Result};

/// The column the object starts at, under its address line.
const MARGIN: usize = 44;
/// Members and elements one `print()` may visit beyond eight per byte of its record (a real type
/// has no more than a member per bit, plus a few empty structs): this bounds the work a malformed
/// description can ask for.
const EXTRA_VISITS: u64 = 1024;
/// Deepest nesting of members and arrays followed.
const MAX_NESTING: usize = 128;

struct Printer<'a> {
    types: &'a [PrintType],
    data: &'a [u8],
    out: &'a mut Vec<u8>,
    /// Bytes of the object shown (`printsize`, at most the object's size).
    limit: u64,
    /// Whether `limit` cuts the object short.
    cut: bool,
    /// The `...` line is out: nothing more is shown but closing brackets.
    stopped: bool,
    visits: u64,
    max_visits: u64,
}

/// Prints `print()`'s output for a pointer `addr` to an object of type `root` of `types` whose bytes
/// are `object` (`None` for a pointer to void), showing at most `printsize` bytes when it is given.
pub fn print_pointer(
    out: &mut Vec<u8>,
    types: &[PrintType],
    root: u32,
    addr: u64,
    object: Option<&[u8]>,
    printsize: Option<u64>,
) -> Result<()> {
    out.extend_from_slice(format!("{addr:#x} = *\n").as_bytes());
    let Some(data) = object else {
        return Ok(());
    };
    let t = types
        .get(root as usize)
        .ok_or(ConsumerError::BadPrintType(root))?;
    if (data.len() as u64) < t.size {
        return Err(ConsumerError::SizeMismatch {
            size: data.len(),
            what: "print()",
        });
    }
    let limit = printsize.map_or(t.size, |n| n.min(t.size));
    let mut p = Printer {
        types,
        data,
        out,
        limit,
        cut: limit < t.size,
        stopped: false,
        visits: 0,
        max_visits: (data.len() as u64).saturating_mul(8) + EXTRA_VISITS,
    };
    p.value("", root, 0, 0, None)?;
    p.out.push(b'\n');
    Ok(())
}

/// C's `isprint()` in the C locale.
fn isprint(c: u8) -> bool {
    (0x20..0x7f).contains(&c)
}

/// The bits of a type as shown: a bit-field's own width, else 8 per byte.
fn is_bitfield(t: &PrintType) -> bool {
    match t.kind {
        PrintKind::Integer { bits, .. } => u64::from(bits) != t.size.saturating_mul(8),
        _ => false,
    }
}

/// Where a value sits among its siblings: as an element of an array (of characters or not), or as
/// a member (or the object itself) when `None`.
type InArray = Option<bool>;

impl Printer<'_> {
    fn put(&mut self, s: &str) {
        self.out.extend_from_slice(s.as_bytes());
    }

    /// The margin and one space a level.
    fn indent(&mut self, depth: usize) {
        self.out.resize(self.out.len() + MARGIN + depth, b' ');
    }

    /// What follows a value: nothing for the object itself, else a comma and a new line.
    fn end(&mut self, depth: usize) {
        if depth != 0 {
            self.put(",\n");
        }
    }

    /// `n` bytes at `at`, zeros past the end of the record.
    fn bytes(&self, at: u64, n: u64) -> Vec<u8> {
        (0..n)
            .map(|i| {
                at.checked_add(i)
                    .and_then(|j| usize::try_from(j).ok())
                    .and_then(|j| self.data.get(j))
                    .copied()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// A little-endian unsigned integer of `n` (at most 16) bytes at `at`.
    fn uint(&self, at: u64, n: u64) -> u128 {
        let mut b = [0u8; 16];
        let n = n.min(16) as usize;
        b[..n].copy_from_slice(&self.bytes(at, n as u64));
        u128::from_le_bytes(b)
    }

    /// A bit-field of `bits` bits at bit offset `off` of the object.
    fn field(&self, off: u64, bits: u16) -> u64 {
        let shift = off % 8;
        let n = (shift + u64::from(bits)).div_ceil(8);
        let v = self.uint(off / 8, n) >> shift;
        if bits >= 64 {
            v as u64
        } else {
            (v as u64) & ((1u64 << bits) - 1)
        }
    }

    /// Whether the value of type `t` at bit offset `off` is zero (a bit-field by its bits, anything
    /// else by its bytes).
    fn is_zero(&self, t: &PrintType, off: u64) -> bool {
        match t.kind {
            PrintKind::Integer { bits, .. } if is_bitfield(t) => self.field(off, bits) == 0,
            _ => self.bytes(off / 8, t.size).iter().all(|&b| b == 0),
        }
    }

    /// Shows one value: the object itself (depth 0), a member named `name`, or an array element.
    fn value(
        &mut self,
        name: &str,
        ty: u32,
        off: u64,
        depth: usize,
        in_array: InArray,
    ) -> Result<()> {
        if self.stopped {
            return Ok(());
        }
        self.visits += 1;
        if self.visits > self.max_visits || depth > MAX_NESTING {
            return Err(ConsumerError::BadPrintType(ty));
        }
        let types = self.types;
        let t = types
            .get(ty as usize)
            .ok_or(ConsumerError::BadPrintType(ty))?;
        // members that are zero are left out, as are the zero characters of a character array; the
        // elements of any other array are all shown
        let shown_if_zero = depth == 0 || in_array == Some(false);
        if !shown_if_zero && self.is_zero(t, off) {
            return Ok(());
        }
        if self.cut && off / 8 >= self.limit {
            self.ellipsis();
            return Ok(());
        }
        self.indent(depth);
        if !name.is_empty() {
            self.put(&format!(".{name} = "));
        }
        self.put(&format!("({})", t.name.trim_end()));
        let at = off / 8;
        match &t.kind {
            PrintKind::Integer { bits, signed, char } => {
                let text = if is_bitfield(t) {
                    format!("{:#x}", self.field(off, *bits))
                } else {
                    self.integer(at, t.size, *signed, *char && in_array == Some(true))
                };
                self.put(&text);
                self.end(depth);
            }
            PrintKind::Float => {
                let text = self.float(at, t.size);
                self.put(&text);
                self.end(depth);
            }
            PrintKind::Pointer { .. } | PrintKind::Function => {
                let v = self.uint(at, t.size.min(8)) as u64;
                // glibc's %p
                let text = if v == 0 {
                    "(nil)".to_string()
                } else {
                    format!("{v:#x}")
                };
                self.put(&text);
                self.end(depth);
            }
            PrintKind::Enum(values) => {
                let v = match t.size {
                    1 => self.uint(at, 1) as u8 as i8 as i64,
                    2 => self.uint(at, 2) as u16 as i16 as i64,
                    4 => self.uint(at, 4) as u32 as i32 as i64,
                    _ => self.uint(at, 8) as u64 as i64,
                };
                match values.iter().find(|(_, x)| *x == v) {
                    Some((n, _)) => {
                        let n = n.clone();
                        self.put(&n);
                    }
                    None => self.put(&v.to_string()),
                }
                self.end(depth);
            }
            PrintKind::Array { element, count } => {
                self.put(" [\n");
                let et = types
                    .get(*element as usize)
                    .ok_or(ConsumerError::BadPrintType(*element))?;
                let chars = matches!(et.kind, PrintKind::Integer { bits: 8, .. }) && et.size == 1;
                for i in 0..u64::from(*count) {
                    let eoff = off.saturating_add(i.saturating_mul(et.size).saturating_mul(8));
                    // a character array ends at its NUL
                    if chars && self.uint(eoff / 8, 1) == 0 {
                        break;
                    }
                    self.value("", *element, eoff, depth + 1, Some(chars))?;
                }
                self.indent(depth);
                self.put("]");
                self.end(depth);
            }
            PrintKind::Struct(members) | PrintKind::Union(members) => {
                self.put(" {\n");
                for m in members {
                    self.value(
                        &m.name,
                        m.ty,
                        off.saturating_add(m.offset_bits),
                        depth + 1,
                        None,
                    )?;
                }
                self.indent(depth);
                self.put("}");
                self.end(depth);
                return Ok(());
            }
            PrintKind::Forward => self.end(depth),
        }
        // a value reaching the limit ends what is shown (an array as a whole, not each element)
        if self.cut && in_array.is_none() && off / 8 + t.size >= self.limit {
            self.ellipsis();
        }
        Ok(())
    }

    /// The `...` line for what `printsize` leaves out; nothing more is shown after it.
    fn ellipsis(&mut self) {
        if !self.stopped {
            self.indent(1);
            self.put("...\n");
            self.stopped = true;
        }
    }

    /// An integer of `size` bytes: decimal, or a quoted character for a printable element of a
    /// character array; 16-byte integers in hex.
    fn integer(&self, at: u64, size: u64, signed: bool, element_char: bool) -> String {
        let v = self.uint(at, size);
        if element_char && size == 1 && isprint(v as u8) {
            return format!("'{}'", v as u8 as char);
        }
        match (size, signed) {
            (1, true) => (v as u8 as i8).to_string(),
            (2, true) => (v as u16 as i16).to_string(),
            (4, true) => (v as u32 as i32).to_string(),
            (8, true) => (v as u64 as i64).to_string(),
            (1..=8, false) => (v as u64).to_string(),
            _ => format!("{v:#x}"),
        }
    }

    /// `float`, `double` and `long double` (x87 extended) as `%f`.
    fn float(&self, at: u64, size: u64) -> String {
        match size {
            4 => format!("{:.6}", f32::from_bits(self.uint(at, 4) as u32)),
            8 => format!("{:.6}", f64::from_bits(self.uint(at, 8) as u64)),
            _ => format!("{:.6}", x87_to_f64(self.uint(at, 10))),
        }
    }
}

/// The value of an x87 80-bit extended-precision number (the low 10 bytes of a `long double`), to
/// the nearest double.
fn x87_to_f64(raw: u128) -> f64 {
    let mant = raw as u64;
    let exp = ((raw >> 64) & 0x7fff) as i32;
    let neg = (raw >> 79) & 1 == 1;
    let v = if exp == 0x7fff {
        if mant << 1 == 0 {
            f64::INFINITY
        } else {
            f64::NAN
        }
    } else {
        // mant * 2^(exp - 16383 - 63), scaled in two steps so neither overflows early
        let e = exp - 16383 - 63;
        (mant as f64) * 2f64.powi(e / 2) * 2f64.powi(e - e / 2)
    };
    if neg {
        -v
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dtrace_dif::program::PrintMember;

    #[test]
    fn x87_values() {
        // 1.0: exponent 16383, integer bit set
        let one = (16383u128 << 64) | (1u128 << 63);
        assert_eq!(x87_to_f64(one), 1.0);
        assert_eq!(x87_to_f64(one | (1u128 << 79)), -1.0);
        assert_eq!(x87_to_f64((16384u128 << 64) | (3u128 << 62)), 3.0);
        assert!(x87_to_f64(0x7fffu128 << 64 | 1).is_nan());
    }

    fn ty(name: &str, size: u64, kind: PrintKind) -> PrintType {
        PrintType {
            name: name.into(),
            size,
            kind,
        }
    }

    fn member(name: &str, ty: u32, offset_bits: u64) -> PrintMember {
        PrintMember {
            name: name.into(),
            ty,
            offset_bits,
        }
    }

    fn int(name: &str, size: u64, signed: bool) -> PrintType {
        let bits = (size * 8) as u16;
        ty(
            name,
            size,
            PrintKind::Integer {
                bits,
                signed,
                char: name == "char",
            },
        )
    }

    /// struct t { int a; char b[5]; union { u8 c; u64 d; } u; void *p; enum e h; } (40 bytes).
    fn types() -> Vec<PrintType> {
        vec![
            ty(
                "struct t",
                40,
                PrintKind::Struct(vec![
                    member("a", 1, 0),
                    member("b", 2, 32),
                    member("u", 4, 128),
                    member("p", 7, 192),
                    member("h", 8, 256),
                ]),
            ),
            int("int", 4, true),
            ty(
                "char [5]",
                5,
                PrintKind::Array {
                    element: 3,
                    count: 5,
                },
            ),
            int("char", 1, true),
            ty(
                "union ",
                8,
                PrintKind::Union(vec![member("c", 5, 0), member("d", 6, 0)]),
            ),
            int("__u8", 1, false),
            int("__u64", 8, false),
            ty("void *", 8, PrintKind::Pointer { function: false }),
            ty(
                "enum e",
                4,
                PrintKind::Enum(vec![("ONE".into(), 1), ("TWO".into(), 2)]),
            ),
        ]
    }

    fn data(a: i32, b: &[u8; 5], d: u64, p: u64, h: u32) -> Vec<u8> {
        let mut v = vec![0u8; 40];
        v[0..4].copy_from_slice(&a.to_le_bytes());
        v[4..9].copy_from_slice(b);
        v[16..24].copy_from_slice(&d.to_le_bytes());
        v[24..32].copy_from_slice(&p.to_le_bytes());
        v[32..36].copy_from_slice(&h.to_le_bytes());
        v
    }

    fn show(data: &[u8], printsize: Option<u64>) -> String {
        let mut out = Vec::new();
        print_pointer(&mut out, &types(), 0, 0xfeed0000, Some(data), printsize).unwrap();
        let m = " ".repeat(MARGIN);
        String::from_utf8(out).unwrap().replace(&m, "|")
    }

    #[test]
    fn members_shown_with_their_types_zero_ones_left_out() {
        let d = data(-3, b"ab\0c\0", 0, 0xfeedfacefeedface, 2);
        assert_eq!(
            show(&d, None),
            "0xfeed0000 = *\n\
             |(struct t) {\n\
             | .a = (int)-3,\n\
             | .b = (char [5]) [\n\
             |  (char)'a',\n\
             |  (char)'b',\n\
             | ],\n\
             | .p = (void *)0xfeedfacefeedface,\n\
             | .h = (enum e)TWO,\n\
             |}\n"
        );
    }

    #[test]
    fn a_character_array_is_shown_up_to_its_nul_even_when_that_comes_first() {
        let d = data(0, b"\0est\0", 0, 0, 7);
        assert_eq!(
            show(&d, None),
            "0xfeed0000 = *\n|(struct t) {\n| .b = (char [5]) [\n| ],\n| .h = (enum e)7,\n|}\n"
        );
    }

    #[test]
    fn printsize_shows_that_many_bytes_and_an_ellipsis() {
        let d = data(1, b"test\0", 12345678, 0xfeedface, 1);
        assert_eq!(
            show(&d, Some(8)),
            "0xfeed0000 = *\n|(struct t) {\n| .a = (int)1,\n| .b = (char [5]) [\n\
             |  (char)'t',\n|  (char)'e',\n|  (char)'s',\n|  (char)'t',\n| ],\n| ...\n|}\n"
        );
        assert_eq!(
            show(&d, Some(24)),
            "0xfeed0000 = *\n|(struct t) {\n| .a = (int)1,\n| .b = (char [5]) [\n\
             |  (char)'t',\n|  (char)'e',\n|  (char)'s',\n|  (char)'t',\n| ],\n\
             | .u = (union) {\n|  .c = (__u8)78,\n|  .d = (__u64)12345678,\n| ...\n| },\n|}\n"
        );
        // a limit past the object's size changes nothing
        assert_eq!(show(&d, Some(4096)), show(&d, None));
    }

    #[test]
    fn a_pointer_to_a_scalar_shows_it_even_when_zero() {
        let t = [int("int", 4, true)];
        let mut out = Vec::new();
        print_pointer(&mut out, &t, 0, 0x10, Some(&[0, 0, 0, 0]), None).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("0x10 = *\n{}(int)0\n", " ".repeat(MARGIN))
        );
    }

    #[test]
    fn malformed_descriptions_are_errors() {
        let mut out = Vec::new();
        assert!(print_pointer(&mut out, &types(), 99, 0, Some(&[0; 40]), None).is_err());
        assert!(print_pointer(&mut out, &types(), 0, 0, Some(&[0; 8]), None).is_err());
        // a struct that contains itself
        let t = [ty(
            "struct s",
            8,
            PrintKind::Struct(vec![member("s", 0, 0)]),
        )];
        assert!(print_pointer(&mut out, &t, 0, 0, Some(&[1; 8]), None).is_err());
    }
}
