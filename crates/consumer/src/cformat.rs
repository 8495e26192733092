//! A C `printf(3)` conversion engine: given one conversion's flags, width and precision and a value, it
//! writes exactly the bytes the C library (in the C locale; in a UTF-8 locale for the wide-character
//! conversions `%lc` and `%ls`) would. DTrace's own conversions (`%a`, `%Y`,
//! `%k`, ...) are built on top of it in [`crate::printf`]; this module knows nothing about records.

/// Flags, width and precision of one conversion (`%-08.3d` and so on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Spec {
    /// `#`: alternate form.
    pub alt: bool,
    /// `0`: pad numbers with zeros.
    pub zero: bool,
    /// `-`: left-justify.
    pub left: bool,
    /// `+`: always print a sign.
    pub plus: bool,
    /// ` `: a space where a plus sign would go.
    pub space: bool,
    /// Minimum field width.
    pub width: usize,
    /// Precision, when given.
    pub prec: Option<usize>,
}

impl Spec {
    /// A spec with only a width (right-justified) or, for negative `w`, a left-justified width.
    pub fn width(w: i64) -> Spec {
        Spec {
            left: w < 0,
            width: w.unsigned_abs() as usize,
            ..Spec::default()
        }
    }

    fn sign(&self, negative: bool) -> &'static [u8] {
        if negative {
            b"-"
        } else if self.plus {
            b"+"
        } else if self.space {
            b" "
        } else {
            b""
        }
    }
}

/// Writes `prefix` (sign, `0x`) and `body` justified in the field; `zero_ok` allows zero padding
/// between the prefix and the body.
fn emit(out: &mut Vec<u8>, spec: &Spec, prefix: &[u8], body: &[u8], zero_ok: bool) {
    let len = prefix.len() + body.len();
    let pad = spec.width.saturating_sub(len);
    if spec.left {
        out.extend_from_slice(prefix);
        out.extend_from_slice(body);
        out.resize(out.len() + pad, b' ');
    } else if spec.zero && zero_ok {
        out.extend_from_slice(prefix);
        out.resize(out.len() + pad, b'0');
        out.extend_from_slice(body);
    } else {
        out.resize(out.len() + pad, b' ');
        out.extend_from_slice(prefix);
        out.extend_from_slice(body);
    }
}

fn digits(mut v: u64, radix: u64, upper: bool, buf: &mut [u8; 24]) -> usize {
    let set: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = set[(v % radix) as usize];
        v /= radix;
        if v == 0 {
            break;
        }
    }
    i
}

/// Applies an integer precision: at least `prec` digits, and none at all for zero with precision 0.
fn int_body(raw: &[u8], prec: Option<usize>, is_zero: bool) -> std::borrow::Cow<'_, [u8]> {
    use std::borrow::Cow;
    match prec {
        Some(0) if is_zero => Cow::Borrowed(&[]),
        Some(p) if p > raw.len() => {
            let mut v = vec![b'0'; p - raw.len()];
            v.extend_from_slice(raw);
            Cow::Owned(v)
        }
        _ => Cow::Borrowed(raw),
    }
}

/// `%d`/`%i` of a signed value.
pub fn fmt_signed(out: &mut Vec<u8>, spec: &Spec, v: i64) {
    let mut buf = [0u8; 24];
    let start = digits(v.unsigned_abs(), 10, false, &mut buf);
    let body = int_body(&buf[start..], spec.prec, v == 0);
    emit(out, spec, spec.sign(v < 0), &body, spec.prec.is_none());
}

/// `%u`, `%o`, `%x`, `%X` of an unsigned value (`conv` is the conversion letter).
pub fn fmt_unsigned(out: &mut Vec<u8>, spec: &Spec, v: u64, conv: u8) {
    let mut buf = [0u8; 24];
    let (radix, upper) = match conv {
        b'o' => (8, false),
        b'x' => (16, false),
        b'X' => (16, true),
        _ => (10, false),
    };
    let start = digits(v, radix, upper, &mut buf);
    let mut body = int_body(&buf[start..], spec.prec, v == 0);
    let mut prefix: &[u8] = b"";
    if spec.alt {
        match conv {
            b'o' if body.first() != Some(&b'0') => body.to_mut().insert(0, b'0'),
            b'x' if v != 0 => prefix = b"0x",
            b'X' if v != 0 => prefix = b"0X",
            _ => {}
        }
    }
    emit(out, spec, prefix, &body, spec.prec.is_none());
}

/// `%c`: one byte.
pub fn fmt_char(out: &mut Vec<u8>, spec: &Spec, c: u8) {
    emit(out, spec, b"", &[c], false);
}

/// `%s`: a string, cut to the precision when one is given.
pub fn fmt_str(out: &mut Vec<u8>, spec: &Spec, s: &[u8]) {
    let s = match spec.prec {
        Some(p) if p < s.len() => &s[..p],
        _ => s,
    };
    emit(out, spec, b"", s, false);
}

/// The multibyte (UTF-8) form of one wide character as glibc's `wcrtomb(3)` gives it in a UTF-8
/// locale: the original UTF-8 scheme of up to six bytes for values up to 0x7fffffff, `None` (`EILSEQ`)
/// for UTF-16 surrogates and negative values. The null wide character converts to one NUL byte.
pub fn wide_to_utf8(wc: i64, buf: &mut [u8; 6]) -> Option<&[u8]> {
    let v = u32::try_from(wc).ok().filter(|&v| v <= 0x7fff_ffff)?;
    if (0xd800..=0xdfff).contains(&v) {
        return None;
    }
    if v < 0x80 {
        buf[0] = v as u8;
        return Some(&buf[..1]);
    }
    // Number of bytes: 2 for 11 bits, then 5 more bits per extra byte.
    let n = match v {
        0..=0x7ff => 2,
        0x800..=0xffff => 3,
        0x1_0000..=0x1f_ffff => 4,
        0x20_0000..=0x3ff_ffff => 5,
        _ => 6,
    };
    let mut rest = v;
    for i in (1..n).rev() {
        buf[i] = 0x80 | (rest & 0x3f) as u8;
        rest >>= 6;
    }
    buf[0] = ((0xff00u32 >> n) as u8) | rest as u8;
    Some(&buf[..n])
}

/// `%lc`: one wide character in its multibyte form, padded to the width in bytes (the `0` flag pads
/// with spaces, as for strings). `Err` carries the value that has no multibyte form.
pub fn fmt_wchar(out: &mut Vec<u8>, spec: &Spec, wc: i64) -> Result<(), i64> {
    let mut buf = [0u8; 6];
    let b = wide_to_utf8(wc, &mut buf).ok_or(wc)?;
    emit(out, spec, b"", b, false);
    Ok(())
}

/// `%ls`: wide characters up to the first null one, converted to their multibyte form; a precision
/// limits the bytes written, never splitting a character (`wcsrtombs(3)`); the width counts bytes.
/// `Err` carries the first value that has no multibyte form.
pub fn fmt_wstr(
    out: &mut Vec<u8>,
    spec: &Spec,
    wide: impl IntoIterator<Item = i64>,
) -> Result<(), i64> {
    let mut s = Vec::new();
    let mut buf = [0u8; 6];
    for wc in wide {
        if wc == 0 {
            break;
        }
        let b = wide_to_utf8(wc, &mut buf).ok_or(wc)?;
        if spec.prec.is_some_and(|p| s.len() + b.len() > p) {
            break;
        }
        s.extend_from_slice(b);
    }
    emit(out, spec, b"", &s, false);
    Ok(())
}

/// Rewrites Rust's `1.5e3`/`1.5e-3` exponent into C's `1.5e+03`/`1.5e-03`.
fn c_exponent(rust: &str, upper: bool) -> Vec<u8> {
    let (mant, exp) = rust.split_once('e').unwrap_or((rust, "0"));
    let (neg, digits) = match exp.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, exp),
    };
    let mut s = Vec::with_capacity(mant.len() + 5);
    s.extend_from_slice(mant.as_bytes());
    s.push(if upper { b'E' } else { b'e' });
    s.push(if neg { b'-' } else { b'+' });
    if digits.len() < 2 {
        s.push(b'0');
    }
    s.extend_from_slice(digits.as_bytes());
    s
}

fn exp_form(v: f64, prec: usize, upper: bool) -> Vec<u8> {
    c_exponent(&format!("{:.*e}", prec, v), upper)
}

/// The decimal exponent `%e` with `prec` digits would show (after rounding).
fn exp_of(v: f64, prec: usize) -> i32 {
    let s = format!("{:.*e}", prec, v);
    s.split_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0)
}

fn strip_frac_zeros(s: &mut Vec<u8>) {
    // Only the mantissa (before any exponent) loses trailing zeros, and only after a point.
    let epos = s.iter().position(|&c| c == b'e' || c == b'E');
    let (mut mant, exp) = match epos {
        Some(p) => (s[..p].to_vec(), s[p..].to_vec()),
        None => (s.clone(), Vec::new()),
    };
    if mant.contains(&b'.') {
        while mant.last() == Some(&b'0') {
            mant.pop();
        }
        if mant.last() == Some(&b'.') {
            mant.pop();
        }
    }
    mant.extend_from_slice(&exp);
    *s = mant;
}

fn hex_float(a: f64, prec: Option<usize>, upper: bool) -> Vec<u8> {
    let bits = a.to_bits();
    let exp_bits = ((bits >> 52) & 0x7ff) as i64;
    let mut mant = bits & ((1u64 << 52) - 1);
    let (mut lead, exp) = if exp_bits == 0 {
        if mant == 0 {
            (0u64, 0i64)
        } else {
            (0u64, -1022)
        }
    } else {
        (1u64, exp_bits - 1023)
    };
    // 13 hex digits of fraction.
    let mut ndig = 13usize;
    if let Some(p) = prec {
        if p < 13 {
            let drop = (13 - p) * 4;
            let rem = mant & ((1u64 << drop) - 1);
            let half = 1u64 << (drop - 1);
            mant >>= drop;
            let odd = mant & 1 == 1;
            if rem > half || (rem == half && odd) {
                mant += 1;
                if mant >> (p * 4) != 0 {
                    mant &= (1u64 << (p * 4)) - 1;
                    lead += 1;
                }
            }
            ndig = p;
        }
    }
    let set: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut frac: Vec<u8> = (0..ndig)
        .map(|i| set[((mant >> ((ndig - 1 - i) * 4)) & 0xf) as usize])
        .collect();
    match prec {
        None => {
            while frac.last() == Some(&b'0') {
                frac.pop();
            }
        }
        Some(p) => frac.resize(p, b'0'),
    }
    let mut s = Vec::new();
    s.push(set[lead as usize & 0xf]);
    if !frac.is_empty() {
        s.push(b'.');
        s.extend_from_slice(&frac);
    }
    s.push(if upper { b'P' } else { b'p' });
    s.extend_from_slice(format!("{:+}", exp).as_bytes());
    s
}

/// The largest floating-point precision honoured.
pub const MAX_FLOAT_PREC: usize = 60_000;

/// `%e %E %f %F %g %G %a %A` of a double.
pub fn fmt_float(out: &mut Vec<u8>, spec: &Spec, v: f64, conv: u8) {
    // Past a few thousand digits a double has only zeros left to show; the cap keeps the precision
    // within what Rust's formatter accepts.
    let capped;
    let spec = match spec.prec {
        Some(p) if p > MAX_FLOAT_PREC => {
            capped = Spec {
                prec: Some(MAX_FLOAT_PREC),
                ..*spec
            };
            &capped
        }
        _ => spec,
    };
    let upper = conv.is_ascii_uppercase();
    let neg = v.is_sign_negative() && !v.is_nan();
    let a = v.abs();
    if !a.is_finite() {
        let body: &[u8] = match (a.is_nan(), upper) {
            (true, false) => b"nan",
            (true, true) => b"NAN",
            (false, false) => b"inf",
            (false, true) => b"INF",
        };
        emit(out, spec, spec.sign(neg), body, false);
        return;
    }
    let mut body: Vec<u8> = match conv.to_ascii_lowercase() {
        b'f' => format!("{:.*}", spec.prec.unwrap_or(6), a).into_bytes(),
        b'e' => exp_form(a, spec.prec.unwrap_or(6), upper),
        b'g' => {
            let p = match spec.prec {
                Some(0) => 1,
                Some(p) => p,
                None => 6,
            };
            let x = if a == 0.0 { 0 } else { exp_of(a, p - 1) };
            let mut s = if x < p as i32 && x >= -4 {
                format!("{:.*}", (p as i32 - 1 - x) as usize, a).into_bytes()
            } else {
                exp_form(a, p - 1, upper)
            };
            if !spec.alt {
                strip_frac_zeros(&mut s);
            }
            s
        }
        _ => {
            let mut s = hex_float(a, spec.prec, upper);
            let mut prefix = spec.sign(neg).to_vec();
            prefix.extend_from_slice(if upper { b"0X" } else { b"0x" });
            if spec.alt && !s.contains(&b'.') {
                let p = s.iter().position(|&c| c == b'p' || c == b'P').unwrap_or(1);
                s.insert(p, b'.');
            }
            emit(out, spec, &prefix, &s, true);
            return;
        }
    };
    if spec.alt && !body.contains(&b'.') {
        let p = body
            .iter()
            .position(|&c| c == b'e' || c == b'E')
            .unwrap_or(body.len());
        body.insert(p, b'.');
    }
    emit(out, spec, spec.sign(neg), &body, true);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(f: &str, width: usize, prec: Option<usize>) -> Spec {
        Spec {
            alt: f.contains('#'),
            zero: f.contains('0'),
            left: f.contains('-'),
            plus: f.contains('+'),
            space: f.contains(' '),
            width,
            prec,
        }
    }

    fn s(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut v = Vec::new();
        f(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn integers_match_c() {
        assert_eq!(s(|o| fmt_signed(o, &sp("", 5, None), -42)), "  -42");
        assert_eq!(s(|o| fmt_signed(o, &sp("0", 5, None), -42)), "-0042");
        assert_eq!(s(|o| fmt_signed(o, &sp("-", 5, None), 42)), "42   ");
        assert_eq!(s(|o| fmt_signed(o, &sp("+", 0, None), 42)), "+42");
        assert_eq!(s(|o| fmt_signed(o, &sp(" ", 0, None), 42)), " 42");
        assert_eq!(s(|o| fmt_signed(o, &sp("0", 6, Some(3)), 7)), "   007");
        assert_eq!(s(|o| fmt_signed(o, &sp("", 0, Some(0)), 0)), "");
        assert_eq!(
            s(|o| fmt_signed(o, &sp("", 0, None), i64::MIN)),
            "-9223372036854775808"
        );
        assert_eq!(s(|o| fmt_unsigned(o, &sp("#", 0, None), 255, b'x')), "0xff");
        assert_eq!(
            s(|o| fmt_unsigned(o, &sp("#0", 8, None), 255, b'X')),
            "0X0000FF"
        );
        assert_eq!(s(|o| fmt_unsigned(o, &sp("#", 0, None), 8, b'o')), "010");
        assert_eq!(s(|o| fmt_unsigned(o, &sp("#", 0, None), 0, b'x')), "0");
        assert_eq!(
            s(|o| fmt_unsigned(o, &sp("", 0, None), u64::MAX, b'u')),
            "18446744073709551615"
        );
    }

    #[test]
    fn strings_and_chars() {
        assert_eq!(s(|o| fmt_str(o, &sp("", 6, Some(3)), b"hello")), "   hel");
        assert_eq!(s(|o| fmt_str(o, &sp("-", 7, None), b"hi")), "hi     ");
        assert_eq!(s(|o| fmt_char(o, &sp("", 3, None), b'A')), "  A");
    }

    #[test]
    fn floats_match_c() {
        assert_eq!(s(|o| fmt_float(o, &sp("", 0, None), 2.5, b'f')), "2.500000");
        assert_eq!(
            s(|o| fmt_float(o, &sp("", 0, Some(2)), 2.675, b'f')),
            "2.67"
        );
        assert_eq!(
            s(|o| fmt_float(o, &sp("", 0, None), 12345.678, b'e')),
            "1.234568e+04"
        );
        assert_eq!(
            s(|o| fmt_float(o, &sp("", 0, None), 0.000123, b'E')),
            "1.230000E-04"
        );
        assert_eq!(
            s(|o| fmt_float(o, &sp("", 0, None), 100000.0, b'g')),
            "100000"
        );
        assert_eq!(
            s(|o| fmt_float(o, &sp("", 0, None), 1000000.0, b'g')),
            "1e+06"
        );
        assert_eq!(
            s(|o| fmt_float(o, &sp("", 0, None), 0.0001, b'g')),
            "0.0001"
        );
        assert_eq!(
            s(|o| fmt_float(o, &sp("", 0, None), 0.00001, b'G')),
            "1E-05"
        );
        assert_eq!(s(|o| fmt_float(o, &sp("#", 0, None), 1.5, b'g')), "1.50000");
        assert_eq!(s(|o| fmt_float(o, &sp("", 0, None), 0.0, b'g')), "0");
        assert_eq!(
            s(|o| fmt_float(o, &sp("", 8, None), f64::INFINITY, b'f')),
            "     inf"
        );
        assert_eq!(s(|o| fmt_float(o, &sp("", 0, None), f64::NAN, b'E')), "NAN");
        assert_eq!(
            s(|o| fmt_float(o, &sp("0", 10, Some(2)), -1.5, b'f')),
            "-000001.50"
        );
        assert_eq!(s(|o| fmt_float(o, &sp("", 0, None), 1.0, b'a')), "0x1p+0");
        assert_eq!(s(|o| fmt_float(o, &sp("", 0, None), 3.0, b'a')), "0x1.8p+1");
        assert_eq!(
            s(|o| fmt_float(o, &sp("", 0, None), -0.1, b'A')),
            "-0X1.999999999999AP-4"
        );
        assert_eq!(s(|o| fmt_float(o, &sp("", 0, None), 0.0, b'a')), "0x0p+0");
        for c in [b'e', b'f', b'g', b'a'] {
            let n = s(|o| fmt_float(o, &sp("", 0, Some(1 << 20)), 1.5, c)).len();
            assert!(n < 70_000 && (c == b'g' || n > 1000));
        }
        assert_eq!(
            s(|o| fmt_float(o, &sp("", 0, Some(1)), 1.97, b'a')),
            "0x2.0p+0"
        );
        assert_eq!(
            s(|o| fmt_float(o, &sp("", 0, Some(1)), 1.5, b'a')),
            "0x1.8p+0"
        );
        assert_eq!(
            s(|o| fmt_float(o, &sp("", 0, Some(0)), 1.97, b'a')),
            "0x2p+0"
        );
    }
}
