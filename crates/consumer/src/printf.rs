//! DTrace's printf-like formats (`printf`, `printa`, `system`, `freopen`): parsing a format string into
//! literal prefixes and conversions with DTrace's rules (`dt_printf_create`), and formatting data records
//! through it (`dt_printf_format`), including DTrace's own conversions `%a %A %C %I %k %P %S %T %Y %@`.
//!
//! Values are read by the size of the record that carries them, as DTrace does: 1-, 2- and 4-byte
//! integers print as C `int`, 8-byte ones as `long long`; a size modifier in the format (`%ld`, `%lld`,
//! `%hd`) is accepted for the type check the compiler does and does not change the value, except `hh`,
//! which narrows to a char as C does.

use dtrace_dif::program::{ActionKind, RecDesc, PRINTF_FIRST_UNSIGNED, PRINTF_UNSIGNED};

use crate::aggvalue;
use crate::cformat::{self, Spec};
use crate::error::{ConsumerError, Result};
use crate::quantize;
use crate::recdata;
use crate::stack;
use crate::symbols::{self, Symbolizer};
use crate::timefmt;

/// How a conversion prints its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvKind {
    /// Signed integer (`%d %i %c` and sized variants).
    Sint,
    /// Unsigned integer (`%u %o %x %X %p`).
    Uint,
    /// Character escaped as in C source (`%C`).
    EscChar,
    /// Floating point (`%e %E %f %g %G` and `L` variants).
    Float,
    /// String (`%s`).
    Str,
    /// String escaped as in C source (`%S`).
    EscStr,
    /// Kernel address as symbol (`%a`).
    KAddr,
    /// User address as symbol (`%A`).
    UAddr,
    /// Stack (`%k`).
    Stack,
    /// Time as `YYYY Mon DD HH:MM:SS` (`%Y`).
    Time,
    /// Time in RFC 822 form (`%T`).
    Time822,
    /// Port number (`%P`).
    Port,
    /// Internet address string (`%I`).
    Inet,
    /// Wide characters (`%lc %wc`: an integer `wchar_t`/`wint_t`; `%ls %ws`: a `wchar_t` array),
    /// printed in their UTF-8 multibyte form.
    Wide,
    /// A literal `%` (`%%`).
    Pct,
}

/// One conversion of a format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conv {
    /// DTrace's name for it, size modifiers included (`lld`, `hx`, `@d` is `d` with `agg`).
    pub name: String,
    /// How it prints.
    pub kind: ConvKind,
    /// The C conversion letter it prints with.
    pub ofmt: u8,
    /// `hh` modifier: narrow to char.
    pub narrow_char: bool,
    /// `#`.
    pub alt: bool,
    /// `0`.
    pub zero: bool,
    /// `-`.
    pub left: bool,
    /// `+`.
    pub plus: bool,
    /// ` `.
    pub space: bool,
    /// `'` (grouping; no effect in the C locale).
    pub group: bool,
    /// `@`: consumes the aggregation value rather than a record.
    pub agg: bool,
    /// Width from the format (0 when none).
    pub width: i32,
    /// Precision from the format (0 when none; DTrace ignores a zero precision).
    pub prec: i32,
    /// `*` width taken from a record.
    pub dyn_width: bool,
    /// `.*` precision taken from a record.
    pub dyn_prec: bool,
}

/// Literal text followed by an optional conversion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Literal bytes printed before the conversion.
    pub prefix: Vec<u8>,
    /// The conversion, absent for trailing text.
    pub conv: Option<Conv>,
}

/// A parsed format string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrintfFormat {
    /// Segments in order.
    pub segments: Vec<Segment>,
}

/// An aggregation value handed to `%@` conversions.
#[derive(Debug, Clone, Copy)]
pub struct AggValue<'a> {
    /// The aggregating function.
    pub action: ActionKind,
    /// Its value bytes.
    pub data: &'a [u8],
    /// Normalization factor (1 when not normalized).
    pub normal: u64,
}

/// What formatting needs besides the records.
pub struct FmtEnv<'a> {
    /// Symbol lookups for `%a`, `%A`, `%k`.
    pub symbols: &'a dyn Symbolizer,
    /// The `stackindent` option.
    pub stackindent: usize,
    /// `$target`'s pid (0: none): `%A` of a bare address resolves in that process, as
    /// `pfprint_uaddr` does.
    pub target: u64,
    /// How distribution bars are drawn (`aggzoom`, `encoding`).
    pub style: quantize::GraphStyle,
    /// The `agghist` option.
    pub agghist: bool,
    /// The `aggpack` option.
    pub aggpack: bool,
    /// The zone `%Y` and `%T` show times in.
    pub zone: &'a timefmt::Zone,
}

fn conv_for(name: &str) -> Option<(ConvKind, u8)> {
    use ConvKind::*;
    let lastc = name.chars().last()?;
    if !lastc.is_ascii() {
        return None;
    }
    let last = lastc as u8;
    let mods = &name[..name.len() - 1];
    let int_mods = ["", "h", "hh", "l", "ll"];
    Some(match last {
        b'd' | b'i' if int_mods.contains(&mods) => (Sint, last),
        b'u' | b'o' | b'x' | b'X' if int_mods.contains(&mods) => (Uint, last),
        b'c' if mods.is_empty() || mods == "hh" => (Sint, b'c'),
        b'c' if mods == "l" || mods == "w" => (Wide, b'c'),
        b's' if mods == "l" || mods == "w" => (Wide, b's'),
        b'e' | b'E' | b'f' | b'g' | b'G' if mods.is_empty() || mods == "L" => (Float, last),
        _ if !mods.is_empty() => return None,
        b'F' => (Float, b'f'),
        b'a' => (KAddr, b's'),
        b'A' => (UAddr, b's'),
        b'C' => (EscChar, b's'),
        b'I' => (Inet, b's'),
        b'k' => (Stack, b's'),
        b'p' => (Uint, b'x'),
        b'P' => (Port, b's'),
        b's' => (Str, b's'),
        b'S' => (EscStr, b's'),
        b'T' => (Time822, b's'),
        b'Y' => (Time, b's'),
        b'%' => (Pct, b'%'),
        _ => return None,
    })
}

fn syntax(index: usize, reason: impl Into<String>) -> ConsumerError {
    ConsumerError::FormatSyntax {
        index,
        reason: reason.into(),
    }
}

impl PrintfFormat {
    /// Parses a format string the way DTrace's compiler does, with its error messages.
    pub fn parse(format: &[u8]) -> Result<PrintfFormat> {
        let b = format;
        let mut segments = Vec::new();
        let mut q = 0usize;
        while let Some(off) = b[q..].iter().position(|&c| c == b'%') {
            let index = segments.len() + 1;
            let prefix = b[q..q + off].to_vec();
            let mut p = q + off; // at '%'
            let mut c = Conv {
                name: String::new(),
                kind: ConvKind::Pct,
                ofmt: b'%',
                narrow_char: false,
                alt: false,
                zero: false,
                left: false,
                plus: false,
                space: false,
                group: false,
                agg: false,
                width: 0,
                prec: 0,
                dyn_width: false,
                dyn_prec: false,
            };
            let mut dot = false;
            let mut digits = false;
            let mut mods = String::new();
            let name = loop {
                p += 1;
                let Some(&ch) = b.get(p) else {
                    return Err(syntax(index, "name expected before end of format string"));
                };
                match ch {
                    b'0' if !dot && !digits => {
                        c.zero = true;
                        c.left = false;
                    }
                    b'0'..=b'9' => {
                        let mut n: i32 = 0;
                        while let Some(&d) = b.get(p).filter(|d| d.is_ascii_digit()) {
                            n = n.saturating_mul(10).saturating_add((d - b'0') as i32);
                            p += 1;
                        }
                        p -= 1;
                        if dot {
                            c.prec = n;
                        } else {
                            c.width = n;
                        }
                        digits = true;
                    }
                    b'#' => c.alt = true,
                    b'*' => {
                        let already = if dot { c.dyn_prec } else { c.dyn_width };
                        if already {
                            return Err(syntax(
                                index,
                                format!(
                                    "has more than one '*' specified for the output {}",
                                    if dot { "precision" } else { "width" }
                                ),
                            ));
                        }
                        if dot {
                            c.dyn_prec = true;
                        } else {
                            c.dyn_width = true;
                        }
                    }
                    b'+' => c.plus = true,
                    b'-' => {
                        c.left = true;
                        c.zero = false;
                    }
                    b'.' => {
                        if dot {
                            return Err(syntax(index, "has more than one '.' specified"));
                        }
                        dot = true;
                        digits = false;
                    }
                    b'?' => c.width = 16,
                    b'@' => c.agg = true,
                    b'\'' => c.group = true,
                    b' ' => c.space = true,
                    b'$' => {
                        return Err(syntax(index, "uses unsupported positional format (%n$)"));
                    }
                    b'%' if b[p - 1] == b'%' => break "%".to_string(),
                    b'%' => {
                        return Err(syntax(
                            index,
                            "cannot be combined with other format flags: %%",
                        ));
                    }
                    b'h' | b'l' | b'L' | b'w' => {
                        if mods.len() < 6 {
                            mods.push(ch as char);
                        }
                    }
                    _ => {
                        let mut n = mods.clone();
                        n.push(ch as char);
                        break n;
                    }
                }
            };
            let Some((kind, ofmt)) = conv_for(&name) else {
                return Err(syntax(index, format!("is undefined: %{name}")));
            };
            c.narrow_char = name.starts_with("hh");
            c.kind = kind;
            c.ofmt = ofmt;
            c.name = name;
            segments.push(Segment {
                prefix,
                conv: Some(c),
            });
            q = p + 1;
        }
        if q < b.len() || b.is_empty() {
            segments.push(Segment {
                prefix: b[q..].to_vec(),
                conv: None,
            });
        }
        Ok(PrintfFormat { segments })
    }

    /// How many conversions consume an aggregation value (`%@`).
    pub fn agg_conversions(&self) -> usize {
        self.segments
            .iter()
            .filter(|s| s.conv.as_ref().is_some_and(|c| c.agg))
            .count()
    }

    /// Whether any conversion consumes an aggregation value.
    pub fn has_agg_conversion(&self) -> bool {
        self.segments
            .iter()
            .any(|s| s.conv.as_ref().is_some_and(|c| c.agg))
    }

    /// Formats `recs` (record descriptions whose offsets index `data`) into `out`. For printa, `aggs`
    /// holds the values `%@` conversions take in turn (the last one repeats). Returns how many records
    /// were consumed (at least one when `recs` is not empty, as for DTrace's printf record).
    pub fn format(
        &self,
        out: &mut Vec<u8>,
        env: &FmtEnv<'_>,
        recs: &[RecDesc],
        data: &[u8],
        aggs: &[AggValue<'_>],
    ) -> Result<usize> {
        let mut next = 0usize;
        let mut curagg = 0usize;
        if self.segments.len() == 1 && self.segments[0].conv.is_none() {
            out.extend_from_slice(&self.segments[0].prefix);
            return Ok(usize::from(!recs.is_empty()));
        }
        for (i, seg) in self.segments.iter().enumerate() {
            out.extend_from_slice(&seg.prefix);
            let Some(conv) = &seg.conv else { continue };
            if conv.kind == ConvKind::Pct {
                out.push(b'%');
                continue;
            }
            let mut width = conv.width as i64;
            let mut prec = conv.prec as i64;
            if conv.dyn_width {
                width = get_int(recs.get(next), data, i + 1)?;
                next += 1;
            }
            if conv.dyn_prec {
                prec = get_int(recs.get(next), data, i + 1)?;
                next += 1;
            }
            // widths and precisions are C `int`s, as in the printf(3) DTrace hands them to
            let spec = Spec {
                alt: conv.alt,
                zero: conv.zero,
                left: width < 0 || conv.left,
                plus: conv.plus,
                space: conv.space,
                width: if conv.kind == ConvKind::Stack && conv.left {
                    0
                } else {
                    width.unsigned_abs().min(i32::MAX as u64) as usize
                },
                // DTrace only passes a precision when it is positive.
                prec: (prec > 0).then_some(prec.min(i64::from(i32::MAX)) as usize),
            };
            if conv.agg {
                let Some(av) = aggs.get(curagg).or(aggs.last()) else {
                    return Err(ConsumerError::MissingArgument(i + 1));
                };
                if curagg + 1 < aggs.len() {
                    curagg += 1;
                }
                agg_value(out, env, conv, &spec, av)?;
                continue;
            }
            let Some(rec) = recs.get(next) else {
                return Err(ConsumerError::MissingArgument(i + 1));
            };
            next += 1;
            let bytes = recdata::slice(data, rec.offset as usize, rec.size as usize)?;
            if let Some(text) = stack::symbol_text(env.symbols, rec.action, bytes) {
                cformat::fmt_str(out, &spec, text?.as_bytes());
                continue;
            }
            value(out, env, conv, &spec, rec, bytes, width)?;
        }
        Ok(next.max(usize::from(!recs.is_empty())))
    }
}

fn get_int(rec: Option<&RecDesc>, data: &[u8], index: usize) -> Result<i64> {
    let rec = rec.ok_or(ConsumerError::MissingArgument(index))?;
    let b = recdata::slice(data, rec.offset as usize, rec.size as usize)?;
    recdata::sint(b)
        .map(|v| v as i32 as i64)
        .ok_or(ConsumerError::SizeMismatch {
            size: b.len(),
            what: "a '*' width or precision",
        })
}

fn mismatch(size: usize, what: &'static str) -> ConsumerError {
    ConsumerError::SizeMismatch { size, what }
}

/// Prints a signed integer per its record size, as C int or long long, divided by `normal`.
pub(crate) fn print_sint(
    out: &mut Vec<u8>,
    conv: &Conv,
    spec: &Spec,
    b: &[u8],
    normal: u64,
) -> Result<()> {
    let v = recdata::sint(b).ok_or(mismatch(b.len(), "an integer conversion"))?;
    let mut v = if b.len() == 8 {
        v.wrapping_div((normal as i64).max(1))
    } else {
        (v as i32).wrapping_div((normal as i32).max(1)) as i64
    };
    if conv.narrow_char {
        v = v as i8 as i64;
    }
    if conv.ofmt == b'c' {
        cformat::fmt_char(out, spec, v as u8);
    } else {
        cformat::fmt_signed(out, spec, v);
    }
    Ok(())
}

/// Prints an unsigned integer per its record size, divided by `normal`.
pub(crate) fn print_uint(
    out: &mut Vec<u8>,
    conv: &Conv,
    spec: &Spec,
    b: &[u8],
    normal: u64,
) -> Result<()> {
    let v = recdata::uint(b).ok_or(mismatch(b.len(), "an integer conversion"))?;
    let mut v = if b.len() == 8 {
        v / normal.max(1)
    } else {
        ((v as u32) / (normal as u32).max(1)) as u64
    };
    if conv.narrow_char {
        v = v as u8 as u64;
    }
    cformat::fmt_unsigned(out, spec, v, conv.ofmt);
    Ok(())
}

/// `%lc`/`%wc` (an integer record, read as C `int` and divided by `normal` like `%d`) and
/// `%ls`/`%ws` (the record's bytes as native-endian 32-bit `wchar_t`s, up to the first null one),
/// converted to UTF-8 as the C library does in a UTF-8 locale.
pub(crate) fn print_wide(
    out: &mut Vec<u8>,
    conv: &Conv,
    spec: &Spec,
    b: &[u8],
    normal: u64,
) -> Result<()> {
    let r = if conv.ofmt == b'c' {
        let v = recdata::sint(b).ok_or(mismatch(b.len(), "a wide-character conversion"))?;
        let v = if b.len() == 8 {
            v.wrapping_div((normal as i64).max(1)) as i32
        } else {
            (v as i32).wrapping_div((normal as i32).max(1))
        };
        cformat::fmt_wchar(out, spec, v as i64)
    } else {
        // As pfprint_wstr: whole wchar_ts only, a trailing partial one is dropped.
        let wide = b
            .chunks_exact(4)
            .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]) as i64);
        cformat::fmt_wstr(out, spec, wide)
    };
    r.map_err(ConsumerError::BadWideChar)
}

/// An 80-bit x87 extended value (in 16 bytes) as a double.
fn f80_to_f64(b: &[u8]) -> f64 {
    let mut m = [0u8; 8];
    m.copy_from_slice(&b[..8]);
    let mant = u64::from_le_bytes(m);
    let se = u16::from_le_bytes([b[8], b[9]]);
    let neg = se & 0x8000 != 0;
    let exp = (se & 0x7fff) as i32;
    let v = if exp == 0x7fff {
        if mant << 1 == 0 {
            f64::INFINITY
        } else {
            f64::NAN
        }
    } else {
        (mant as f64) * 2f64.powi(exp - 16383 - 63)
    };
    if neg {
        -v
    } else {
        v
    }
}

fn escape(out: &mut Vec<u8>, s: &[u8]) {
    for &c in s {
        match c {
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x0b => out.extend_from_slice(b"\\v"),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            0x20..=0x7e => out.push(c),
            _ => out.extend_from_slice(format!("\\{c:03o}").as_bytes()),
        }
    }
}

/// Whether the compiler marked `rec` as an unsigned integer argument: a later argument's record by
/// its `arg`, the first one (the printf-like action's own record) by its `arg`'s high bit.
fn unsigned_arg(rec: &RecDesc) -> bool {
    match rec.action {
        ActionKind::DifExpr => rec.arg == PRINTF_UNSIGNED,
        ActionKind::Printf | ActionKind::System | ActionKind::Freopen => {
            rec.arg & PRINTF_FIRST_UNSIGNED != 0
        }
        _ => false,
    }
}

#[allow(clippy::too_many_arguments)]
fn value(
    out: &mut Vec<u8>,
    env: &FmtEnv<'_>,
    conv: &Conv,
    spec: &Spec,
    rec: &RecDesc,
    b: &[u8],
    width: i64,
) -> Result<()> {
    match conv.kind {
        // %d of an unsigned argument prints it unsigned, as DTrace for Linux does
        ConvKind::Sint if unsigned_arg(rec) && conv.ofmt != b'c' && !conv.narrow_char => {
            let v = recdata::uint(b).ok_or(mismatch(b.len(), "an integer conversion"))?;
            cformat::fmt_unsigned(out, spec, v, b'u');
        }
        ConvKind::Sint => print_sint(out, conv, spec, b, 1)?,
        ConvKind::Uint => print_uint(out, conv, spec, b, 1)?,
        ConvKind::Float => {
            let v = match b.len() {
                4 => f32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f64,
                8 => f64::from_bits(recdata::uint(b).unwrap_or(0)),
                16 => f80_to_f64(b),
                n => return Err(mismatch(n, "a floating-point conversion")),
            };
            cformat::fmt_float(out, spec, v, conv.ofmt);
        }
        ConvKind::Str | ConvKind::Inet => cformat::fmt_str(out, spec, recdata::cstr(b)),
        ConvKind::EscStr => {
            let mut e = Vec::new();
            escape(&mut e, recdata::cstr(b));
            cformat::fmt_str(out, spec, &e);
        }
        ConvKind::EscChar => {
            if b.len() > 4 {
                return Err(mismatch(b.len(), "%C"));
            }
            let v = recdata::sint(b).ok_or(mismatch(b.len(), "%C"))?;
            let mut e = Vec::new();
            escape(&mut e, &[v as u8]);
            cformat::fmt_str(out, spec, &e);
        }
        ConvKind::KAddr => {
            if b.len() != 4 && b.len() != 8 {
                return Err(mismatch(b.len(), "%a"));
            }
            let a = recdata::uint(b).unwrap_or(0);
            let s = symbols::addr_to_string(env.symbols.kernel(a), a);
            cformat::fmt_str(out, spec, s.as_bytes());
        }
        ConvKind::UAddr => {
            let (pid, a) = match b.len() {
                4 | 8 => (env.target, recdata::uint(b).unwrap_or(0)),
                16 => (
                    recdata::u64_at(b, 0).unwrap_or(0),
                    recdata::u64_at(b, 1).unwrap_or(0),
                ),
                n => return Err(mismatch(n, "%A")),
            };
            let s = symbols::uaddr_to_string(env.symbols, pid, a);
            cformat::fmt_str(out, spec, s.as_bytes());
        }
        ConvKind::Stack => {
            // A left-justified %k sets the stack indentation to its width.
            let indent = if width < 0 {
                width.unsigned_abs() as usize
            } else if conv.left {
                width as usize
            } else {
                0
            };
            let frame = Spec {
                width: spec.width,
                left: spec.left,
                ..Spec::default()
            };
            stack::print_any(out, env.symbols, rec, b, indent, Some(&frame))?;
        }
        ConvKind::Time | ConvKind::Time822 => {
            if b.len() != 8 {
                return Err(mismatch(b.len(), "a time conversion"));
            }
            print_time(out, env, conv, spec, recdata::uint(b).unwrap_or(0));
        }
        ConvKind::Port => {
            if b.len() != 2 {
                return Err(mismatch(b.len(), "%P"));
            }
            let s = recdata::uint(b).unwrap_or(0).to_string();
            cformat::fmt_str(out, spec, s.as_bytes());
        }
        ConvKind::Wide => print_wide(out, conv, spec, b, 1)?,
        ConvKind::Pct => out.push(b'%'),
    }
    Ok(())
}

fn agg_value(
    out: &mut Vec<u8>,
    env: &FmtEnv<'_>,
    conv: &Conv,
    spec: &Spec,
    av: &AggValue<'_>,
) -> Result<()> {
    match av.action {
        ActionKind::AggAvg => {
            let v = aggvalue::average(av.data, av.normal)?;
            print_int_value(out, conv, spec, v)
        }
        ActionKind::AggStddev => {
            let v = aggvalue::stddev(av.data, av.normal)? as i64;
            print_int_value(out, conv, spec, v)
        }
        ActionKind::AggQuantize => quantize::print_quantize(out, av.data, av.normal, &env.style),
        ActionKind::AggLquantize => quantize::print_lquantize(out, av.data, av.normal, &env.style),
        ActionKind::AggLlquantize => {
            quantize::print_llquantize(out, av.data, av.normal, &env.style)
        }
        _ => match conv.kind {
            ConvKind::Uint => print_uint(out, conv, spec, av.data, av.normal),
            ConvKind::Sint => print_sint(out, conv, spec, av.data, av.normal),
            ConvKind::Wide if conv.ofmt == b'c' => print_wide(out, conv, spec, av.data, av.normal),
            // An aggregation value is an int64_t, not a wchar_t array.
            ConvKind::Wide => Err(mismatch(av.data.len(), "a wchar_t array (%ls)")),
            // `%@Y` and `%@T`: the value (of `max(walltimestamp)`, say) as a time.
            ConvKind::Time | ConvKind::Time822 => {
                let v = recdata::sint(av.data).ok_or(mismatch(av.data.len(), "%@"))?;
                print_time(out, env, conv, spec, (v / (av.normal as i64).max(1)) as u64);
                Ok(())
            }
            _ => {
                let v = recdata::sint(av.data).ok_or(mismatch(av.data.len(), "%@"))?;
                print_int_value(out, conv, spec, v / (av.normal as i64).max(1))
            }
        },
    }
}

/// `%Y` (`YYYY Mon DD HH:MM:SS`) or `%T` (RFC 822) of `ns` nanoseconds since the epoch.
fn print_time(out: &mut Vec<u8>, env: &FmtEnv<'_>, conv: &Conv, spec: &Spec, ns: u64) {
    let s = if conv.kind == ConvKind::Time {
        timefmt::ymdhms(ns, env.zone)
    } else {
        timefmt::rfc822(ns, env.zone)
    };
    cformat::fmt_str(out, spec, s.as_bytes());
}

fn print_int_value(out: &mut Vec<u8>, conv: &Conv, spec: &Spec, v: i64) -> Result<()> {
    match conv.kind {
        ConvKind::Uint => cformat::fmt_unsigned(out, spec, v as u64, conv.ofmt),
        ConvKind::Float => cformat::fmt_float(out, spec, v as f64, conv.ofmt),
        _ => cformat::fmt_signed(out, spec, v),
    }
    Ok(())
}
