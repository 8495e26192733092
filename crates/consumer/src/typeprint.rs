//! `print()` of typed data (libdtrace's `dt_print`): the recorded bytes of a value walked by the type
//! description the compiler left in `Program::print_types`, printed as `mdb`'s `::print -tn` would:
//! the type name, then the value; struct and union members one a line with their types and names,
//! indented four spaces a level; integers and pointers in hex, characters quoted, enums by name,
//! arrays in brackets (character arrays that hold a string as that string), bit-fields with their
//! widths, function pointers by symbol.

use dtrace_dif::program::{PrintKind, PrintType};

use crate::cformat::{self, Spec};
use crate::error::{ConsumerError, Result};
use crate::symbols::Symbolizer;

/// Members and elements one `print()` may visit beyond eight per byte of its record (a real type
/// has no more than a member per bit, plus a few empty structs): this bounds the work a malformed
/// description can ask for.
const EXTRA_VISITS: u64 = 1024;
/// Deepest nesting of members and arrays followed.
const MAX_NESTING: usize = 128;

/// Where the walk is (`dt_printarg_t`): the byte offset of the object being visited within the record,
/// the member depth last printed and the array nesting.
#[derive(Debug, Clone, Copy)]
struct Place {
    base: usize,
    depth: usize,
    nest: usize,
}

struct Printer<'a> {
    types: &'a [PrintType],
    data: &'a [u8],
    syms: &'a dyn Symbolizer,
    out: &'a mut Vec<u8>,
    visits: u64,
    max_visits: u64,
}

/// Prints `data`, a value of type `root` of `types`, as DTrace's `print()` does.
pub fn print_typed(
    out: &mut Vec<u8>,
    types: &[PrintType],
    root: u32,
    data: &[u8],
    syms: &dyn Symbolizer,
) -> Result<()> {
    let t = types
        .get(root as usize)
        .ok_or(ConsumerError::BadPrintType(root))?;
    if (data.len() as u64) < t.size {
        return Err(ConsumerError::SizeMismatch {
            size: data.len(),
            what: "print()",
        });
    }
    let mut p = Printer {
        types,
        data,
        syms,
        out,
        visits: 0,
        max_visits: (data.len() as u64).saturating_mul(8) + EXTRA_VISITS,
    };
    let mut pa = Place {
        base: 0,
        depth: 0,
        nest: 0,
    };
    p.visit(&mut pa, "", root, 0, 0)?;
    p.trailing_braces(&pa, 0);
    Ok(())
}

/// C's `isprint()` in the C locale.
fn isprint(c: u8) -> bool {
    (0x20..0x7f).contains(&c)
}

fn structlike(k: &PrintKind) -> bool {
    matches!(k, PrintKind::Struct(_) | PrintKind::Union(_))
}

/// `%#x`: `0` for zero, else `0x` and the digits.
fn alt_hex(v: u64) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

impl Printer<'_> {
    fn put(&mut self, s: &str) {
        self.out.extend_from_slice(s.as_bytes());
    }

    fn spaces(&mut self, n: usize) {
        self.out.resize(self.out.len() + n, b' ');
    }

    /// `n` bytes at `at`, zeros past the end of the record.
    fn bytes(&self, at: usize, n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| {
                at.checked_add(i)
                    .and_then(|j| self.data.get(j))
                    .copied()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// A little-endian unsigned integer of `n` (at most 16) bytes at `at`.
    fn uint(&self, at: usize, n: usize) -> u128 {
        let mut b = [0u8; 16];
        let n = n.min(16);
        b[..n].copy_from_slice(&self.bytes(at, n));
        u128::from_le_bytes(b)
    }

    /// `ctf_type_visit` with `dt_print_member` as the callback: the type itself, then (for structs
    /// and unions) each member, one level deeper.
    fn visit(&mut self, pa: &mut Place, name: &str, ty: u32, off: u64, depth: usize) -> Result<()> {
        self.visits += 1;
        if self.visits > self.max_visits || depth + pa.nest > MAX_NESTING {
            return Err(ConsumerError::BadPrintType(ty));
        }
        self.member(pa, name, ty, off, depth)?;
        let members = match self.types.get(ty as usize).map(|t| &t.kind) {
            Some(PrintKind::Struct(m)) | Some(PrintKind::Union(m)) => m,
            _ => return Ok(()),
        };
        for m in members {
            self.visit(
                pa,
                &m.name,
                m.ty,
                off.saturating_add(m.offset_bits),
                depth + 1,
            )?;
        }
        Ok(())
    }

    /// Closes the structs and unions left since the last member printed (`dt_print_trailing_braces`).
    fn trailing_braces(&mut self, pa: &Place, depth: usize) {
        for d in (depth + 1..=pa.depth).rev() {
            self.spaces((d + pa.nest - 1) * 4);
            self.put("}");
            if d != depth + 1 {
                self.put("\n");
            }
        }
    }

    fn indent(&mut self, pa: &Place) {
        self.spaces((pa.depth + pa.nest) * 4);
    }

    /// One member (or the value itself, or an array element): `dt_print_member`.
    fn member(
        &mut self,
        pa: &mut Place,
        name: &str,
        ty: u32,
        off: u64,
        depth: usize,
    ) -> Result<()> {
        self.trailing_braces(pa, depth);
        if depth < pa.depth {
            self.put("\n");
        }
        pa.depth = depth;
        let Some(t) = self.types.get(ty as usize) else {
            self.indent(pa);
            self.put(&format!("{name} = <invalid type {ty}>"));
            return Ok(());
        };
        let arraymember = pa.nest != 0 && depth == 0;
        let brief = arraymember && !structlike(&t.kind);
        if !brief {
            if arraymember {
                self.put("\n");
            }
            self.indent(pa);
            self.put(&t.name);
            if !name.is_empty() {
                if !t.name.ends_with('*') && !t.name.ends_with(' ') {
                    self.put(" ");
                }
                self.put(name);
                if let PrintKind::Integer { bits, .. } = t.kind {
                    let size = u64::from(bits) / 8;
                    if !bits.is_multiple_of(8)
                        || !off.is_multiple_of(8)
                        || size > 8
                        || size != t.size
                    {
                        self.put(&format!(" :{bits}"));
                    }
                }
                self.put(" =");
            }
            self.put(" ");
        }
        let at = pa.base.saturating_add((off / 8) as usize);
        match &t.kind {
            PrintKind::Integer { bits, signed, char } => self.int(at, off, *bits, *signed && *char),
            PrintKind::Float => self.float(at, t.size),
            PrintKind::Pointer { function } => self.pointer(at, t.size, *function),
            PrintKind::Function => self.hex(at, t.size),
            PrintKind::Array { element, count } => self.array(pa, at, *element, *count)?,
            PrintKind::Struct(_) | PrintKind::Union(_) => self.put("{"),
            PrintKind::Enum(values) => self.enumeration(at, t.size, values),
            PrintKind::Forward => self.put("<forward decl>"),
        }
        if !brief {
            self.put("\n");
        }
        Ok(())
    }

    /// A fixed-size integer in hex (`dt_print_hex`).
    fn hex(&mut self, at: usize, size: u64) {
        match size {
            1 | 2 | 4 | 8 => {
                let v = self.uint(at, size as usize) as u64;
                self.put(&alt_hex(v));
            }
            _ => self.put(&format!("<invalid size {size}>")),
        }
    }

    /// An integer: a bit-field when its width is not a power-of-two number of bytes up to 8, a
    /// character when it is C's `char`, else hex.
    fn int(&mut self, at: usize, off: u64, bits: u16, is_char: bool) {
        let size = u64::from(bits / 8);
        if size > 8 || !bits.is_multiple_of(8) || (size != 0 && !size.is_power_of_two()) {
            // Read every byte the field touches (DTrace reads only ceil(bits / 8) of them, which
            // loses the high bits of a field that crosses a byte boundary).
            let shift = (off % 8) as u32;
            let n = (shift as usize + bits as usize).div_ceil(8);
            let v = self.uint(at, n) >> shift;
            let v = if bits >= 64 {
                v as u64
            } else {
                (v as u64) & ((1u64 << bits) - 1)
            };
            self.put(&alt_hex(v));
            return;
        }
        if is_char && bits == 8 {
            let c = self.uint(at, 1) as u8;
            if isprint(c) {
                self.put(&format!("'{}'", c as char));
            } else if c == 0 {
                self.put("'\\0'");
            } else {
                // C's `char` is signed: `%03o` shows the int it promotes to
                self.put(&format!("'\\{:03o}'", c as i8 as i32 as u32));
            }
            return;
        }
        self.hex(at, size);
    }

    /// `float` and `double` as `%+.7e`, `long double` (x87 extended) as `%+.16LE`.
    fn float(&mut self, at: usize, size: u64) {
        let spec = |prec| Spec {
            plus: true,
            prec: Some(prec),
            ..Spec::default()
        };
        match size {
            4 => {
                let v = f32::from_bits(self.uint(at, 4) as u32);
                cformat::fmt_float(self.out, &spec(7), f64::from(v), b'e');
            }
            8 => {
                let v = f64::from_bits(self.uint(at, 8) as u64);
                cformat::fmt_float(self.out, &spec(7), v, b'e');
            }
            16 => {
                let v = x87_to_f64(self.uint(at, 10));
                cformat::fmt_float(self.out, &spec(16), v, b'E');
            }
            _ => self.put("<unknown encoding>"),
        }
    }

    /// A pointer in hex; a function pointer by its kernel symbol when one holds it.
    fn pointer(&mut self, at: usize, size: u64, function: bool) {
        if function && size == 8 {
            let pc = self.uint(at, 8) as u64;
            if let Some(info) = self.syms.kernel(pc) {
                if let Some((name, _)) = info.symbol {
                    self.put(&format!("{}`{}", info.object, name));
                    return;
                }
            }
        }
        self.hex(at, size);
    }

    /// An enum by the name of its value, or the value in decimal.
    fn enumeration(&mut self, at: usize, size: u64, values: &[(String, i64)]) {
        let v = match size {
            1 => self.uint(at, 1) as u8 as i64,
            2 => self.uint(at, 2) as u16 as i64,
            4 => self.uint(at, 4) as u32 as i32 as i64,
            _ => {
                self.put(&format!("<invalid enum size {size}>"));
                return;
            }
        };
        match values.iter().find(|(_, x)| *x == v) {
            Some((n, _)) => {
                let n = n.clone();
                self.put(&n);
            }
            None => self.put(&v.to_string()),
        }
    }

    /// An array (`dt_print_array`): `[ a, b, c ]`, struct elements one per block, and a character
    /// array holding a NUL-terminated printable string as `"that string"` (without the brackets at
    /// the top level, so `print("foo")` is `string "foo"`).
    fn array(&mut self, pa: &Place, at: usize, element: u32, count: u32) -> Result<()> {
        let Some(et) = self.types.get(element as usize) else {
            self.put(&format!("<invalid type {element}>"));
            return Ok(());
        };
        let eltsize = usize::try_from(et.size).unwrap_or(usize::MAX);
        let elem_at = |i: u32| at.saturating_add(eltsize.saturating_mul(i as usize));
        let ekind = et.kind.clone();
        let mut isstring = false;
        // (a character type of size 0 only comes from a malformed description; it is no string)
        if let (
            PrintKind::Integer {
                bits: 8,
                signed: true,
                char: true,
            },
            1..,
        ) = (&ekind, eltsize)
        {
            let mut i = 0;
            let mut c = 1u8;
            while i < count {
                c = self.uint(elem_at(i), 1) as u8;
                if !isprint(c) || c == 0 {
                    break;
                }
                i += 1;
            }
            isstring = i != count && c == 0;
        }
        let brackets = !isstring || pa.depth != 0;
        if brackets {
            self.put("[ ");
        }
        if isstring {
            self.put("\"");
            for i in 0..count {
                let c = self.uint(elem_at(i), 1) as u8;
                if c == 0 {
                    break;
                }
                self.out.push(c);
            }
            self.put("\"");
        } else {
            for i in 0..count {
                let mut sub = Place {
                    base: elem_at(i),
                    depth: 0,
                    nest: pa.nest + pa.depth + 1,
                };
                self.visit(&mut sub, "", element, 0, 0)?;
                self.trailing_braces(&sub, 0);
                if i + 1 != count {
                    self.put(", ");
                } else if structlike(&ekind) {
                    self.put("\n");
                }
            }
        }
        if brackets {
            if structlike(&ekind) {
                self.indent(pa);
            } else {
                self.put(" ");
            }
            self.put("]");
        }
        Ok(())
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

    #[test]
    fn x87_values() {
        // 1.0: exponent 16383, integer bit set
        let one = (16383u128 << 64) | (1u128 << 63);
        assert_eq!(x87_to_f64(one), 1.0);
        assert_eq!(x87_to_f64(one | (1u128 << 79)), -1.0);
        assert_eq!(x87_to_f64((16384u128 << 64) | (3u128 << 62)), 3.0);
        assert!(x87_to_f64(0x7fffu128 << 64 | 1).is_nan());
    }

    use crate::symbols::{NoSymbols, SymInfo};
    use dtrace_dif::program::PrintMember;

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

    fn show(types: &[PrintType], root: u32, data: &[u8], syms: &dyn Symbolizer) -> String {
        let mut out = Vec::new();
        print_typed(&mut out, types, root, data, syms).unwrap();
        String::from_utf8(out).unwrap()
    }

    struct OneSymbol;
    impl Symbolizer for OneSymbol {
        fn kernel(&self, addr: u64) -> Option<SymInfo> {
            (0x1000..0x1100).contains(&addr).then(|| SymInfo {
                object: "vmlinux".into(),
                symbol: Some(("do_sys_open".into(), 0x1000)),
            })
        }
    }

    #[test]
    fn function_pointers_print_by_symbol() {
        let types = [
            ty("int (*)()", 8, PrintKind::Pointer { function: true }),
            ty(
                "struct ops",
                16,
                PrintKind::Struct(vec![member("open", 0, 0), member("close", 0, 64)]),
            ),
        ];
        let mut data = 0x1010u64.to_le_bytes().to_vec();
        data.extend_from_slice(&0x9999u64.to_le_bytes());
        assert_eq!(
            show(&types, 1, &data, &OneSymbol),
            "struct ops {\n    int (*)() open = vmlinux`do_sys_open\n    int (*)() close = 0x9999\n}"
        );
        assert_eq!(
            show(&types, 1, &data, &NoSymbols),
            "struct ops {\n    int (*)() open = 0x1010\n    int (*)() close = 0x9999\n}"
        );
    }

    #[test]
    fn floats_forward_declarations_and_small_enums() {
        let types = [
            ty("float", 4, PrintKind::Float),
            ty("double", 8, PrintKind::Float),
            ty("long double", 16, PrintKind::Float),
            ty("struct hidden", 0, PrintKind::Forward),
            ty("enum small", 1, PrintKind::Enum(vec![("ONE".into(), 1)])),
            ty("enum odd", 3, PrintKind::Enum(vec![])),
            ty(
                "struct f",
                40,
                PrintKind::Struct(vec![
                    member("f", 0, 0),
                    member("d", 1, 64),
                    member("ld", 2, 128),
                    member("h", 3, 256),
                    member("e", 4, 264),
                    member("o", 5, 272),
                ]),
            ),
        ];
        let mut data = vec![0u8; 40];
        data[..4].copy_from_slice(&1.5f32.to_le_bytes());
        data[8..16].copy_from_slice(&(-0.25f64).to_le_bytes());
        // 2.0 in x87 extended precision
        let two = (16384u128 << 64) | (1u128 << 63);
        data[16..32].copy_from_slice(&two.to_le_bytes());
        data[33] = 1;
        assert_eq!(
            show(&types, 6, &data, &NoSymbols),
            "struct f {\n    float f = +1.5000000e+00\n    double d = -2.5000000e-01\n\
             \x20   long double ld = +2.0000000000000000E+00\n    struct hidden h = <forward decl>\n\
             \x20   enum small e = ONE\n    enum odd o = <invalid enum size 3>\n}"
        );
    }

    #[test]
    fn bit_fields_crossing_bytes_keep_their_high_bits() {
        let types = [
            ty(
                "unsigned",
                2,
                PrintKind::Integer {
                    bits: 10,
                    signed: false,
                    char: false,
                },
            ),
            ty("struct b", 4, PrintKind::Struct(vec![member("x", 0, 5)])),
        ];
        // bits 5..15 hold 0x3ff
        let data = (0x3ffu32 << 5).to_le_bytes();
        assert_eq!(
            show(&types, 1, &data, &NoSymbols),
            "struct b {\n    unsigned x :10 = 0x3ff\n}"
        );
    }

    #[test]
    fn malformed_descriptions_are_errors_not_hangs() {
        // a struct that contains itself
        let types = [ty(
            "struct loop",
            4,
            PrintKind::Struct(vec![member("l", 0, 0)]),
        )];
        let mut out = Vec::new();
        assert!(matches!(
            print_typed(&mut out, &types, 0, &[0; 4], &NoSymbols),
            Err(ConsumerError::BadPrintType(_))
        ));
        // zero-size characters (a string test over them would never meet a NUL)
        let types = [
            ty(
                "char",
                0,
                PrintKind::Integer {
                    bits: 8,
                    signed: true,
                    char: true,
                },
            ),
            ty(
                "char [4294967295]",
                0,
                PrintKind::Array {
                    element: 0,
                    count: u32::MAX,
                },
            ),
        ];
        assert!(print_typed(&mut Vec::new(), &types, 1, b"aaaa", &NoSymbols).is_err());
        // an array of four thousand million zero-size elements
        let types = [
            ty("struct e", 0, PrintKind::Struct(vec![])),
            ty(
                "struct e [4294967295]",
                0,
                PrintKind::Array {
                    element: 0,
                    count: u32::MAX,
                },
            ),
        ];
        let mut out = Vec::new();
        assert!(print_typed(&mut out, &types, 1, &[], &NoSymbols).is_err());
        // unknown root, and a record too short for the type
        assert!(print_typed(&mut out, &types, 7, &[], &NoSymbols).is_err());
        let types = [ty(
            "long",
            8,
            PrintKind::Integer {
                bits: 64,
                signed: true,
                char: false,
            },
        )];
        assert!(print_typed(&mut out, &types, 0, &[0; 4], &NoSymbols).is_err());
        // a member of an unknown type
        let types = [ty(
            "struct s",
            4,
            PrintKind::Struct(vec![member("m", 9, 0)]),
        )];
        assert_eq!(
            show(&types, 0, &[0; 4], &NoSymbols),
            "struct s {\n    m = <invalid type 9>}"
        );
    }

    #[test]
    fn alternate_hex() {
        assert_eq!(alt_hex(0), "0");
        assert_eq!(alt_hex(255), "0xff");
    }
}
