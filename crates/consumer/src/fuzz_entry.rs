//! Entry points that turn arbitrary bytes into consumer inputs — enabled-probe descriptions, principal
//! buffers, aggregation records, format strings, `print()` type descriptions — and run them through
//! decoding and formatting. They
//! back the cargo-fuzz targets in `fuzz/` and the fuzz smoke test; they must never panic.

use dtrace_dif::program::{print_arg, ActionKind, PrintKind, PrintMember, PrintType, RecDesc};
use dtrace_framework::records::{AggDesc, AggRecord, BufferSnapshot, EprobeDesc, ProbeInfo};

use crate::consume::{ConsumeAction, Decoder, DefaultOutput};
use crate::printf::{AggValue, FmtEnv, PrintfFormat};
use crate::symbols::NoSymbols;

const ACTIONS: [ActionKind; 20] = [
    ActionKind::DifExpr,
    ActionKind::Exit,
    ActionKind::Printf,
    ActionKind::Printa,
    ActionKind::LibAct,
    ActionKind::Tracemem,
    ActionKind::TracememDynsize,
    ActionKind::Ustack,
    ActionKind::Usym,
    ActionKind::Stack,
    ActionKind::Sym,
    ActionKind::Mod,
    ActionKind::AggCount,
    ActionKind::AggAvg,
    ActionKind::AggStddev,
    ActionKind::AggQuantize,
    ActionKind::AggLquantize,
    ActionKind::AggLlquantize,
    ActionKind::AggMin,
    ActionKind::Freopen,
];

const FORMATS: [&str; 6] = [
    "%d %s\n",
    "%*.*d|%-10s|%x|%c",
    "%@d %k %a %A",
    "%Y %T %S %C %P %I",
    "%f %e %g %a",
    "%@8u %@d %s %s %s",
];

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u64(&mut self) -> u64 {
        (0..8).fold(0u64, |a, i| a | (self.u8() as u64) << (8 * i))
    }
}

fn rec(b: &mut Bytes<'_>) -> RecDesc {
    let action = ACTIONS[b.u8() as usize % ACTIONS.len()];
    let print = b.u8().is_multiple_of(4);
    let size = match b.u8() % 8 {
        0 => 1,
        1 => 2,
        2 => 4,
        3 => 8,
        4 => 16,
        5 => 127 * 8,
        _ => b.u8() as u32,
    };
    RecDesc {
        action,
        size,
        offset: b.u8() as u32,
        alignment: 1,
        format: (b.u8() % 8) as u16,
        arg: if action == ActionKind::LibAct && print {
            print_arg(u32::from(b.u8() % 8))
        } else if b.u8() & 1 == 0 {
            b.u8() as u64
        } else {
            b.u64()
        },
    }
}

/// A type table read from `b`: entries of every kind, with member, element and size fields as the
/// bytes say (dangling indices, cycles and huge counts included).
fn print_types(b: &mut Bytes<'_>) -> Vec<PrintType> {
    let n = b.u8() % 8 + 1;
    (0..n)
        .map(|i| {
            let kind = match b.u8() % 10 {
                0 => PrintKind::Integer {
                    bits: u16::from(b.u8()),
                    signed: b.u8() & 1 == 1,
                    char: b.u8() & 1 == 1,
                },
                1 => PrintKind::Float,
                2 => PrintKind::Pointer {
                    function: b.u8() & 1 == 1,
                },
                3 => PrintKind::Array {
                    element: u32::from(b.u8() % 9),
                    count: if b.u8() & 1 == 0 {
                        u32::from(b.u8())
                    } else {
                        b.u64() as u32
                    },
                },
                4 | 5 => {
                    let m = (0..b.u8() % 4)
                        .map(|j| PrintMember {
                            name: format!("m{j}"),
                            ty: u32::from(b.u8() % 9),
                            offset_bits: u64::from(b.u8()) * 4,
                        })
                        .collect();
                    if b.u8() & 1 == 0 {
                        PrintKind::Struct(m)
                    } else {
                        PrintKind::Union(m)
                    }
                }
                6 => PrintKind::Enum(vec![("A".into(), 0), ("B".into(), i64::from(b.u8()))]),
                7 => PrintKind::Function,
                _ => PrintKind::Forward,
            };
            PrintType {
                name: if b.u8() & 1 == 0 {
                    format!("t{i}")
                } else {
                    format!("t{i} *")
                },
                size: [0u64, 1, 2, 4, 8, 16, 3, 64][b.u8() as usize % 8],
                kind,
            }
        })
        .collect()
}

/// Decodes a `print()` type table from `data` and prints the rest of the bytes as each of its types.
pub fn print_typed_bytes(data: &[u8]) {
    let mut b = Bytes(data);
    let types = print_types(&mut b);
    let body = b.0;
    let mut out = Vec::new();
    for root in 0..=types.len() as u32 {
        for printsize in [None, Some(body.len() as u64 / 2)] {
            out.clear();
            let _ =
                crate::typeprint::print_pointer(&mut out, &types, root, 8, Some(body), printsize);
        }
    }
}

/// Decodes descriptions and a buffer from `data`, consumes it, and prints the aggregations.
pub fn consume_bytes(data: &[u8]) {
    let mut b = Bytes(data);
    let mut d = Decoder::default();
    let formats: Vec<Vec<u8>> = FORMATS.iter().map(|s| s.as_bytes().to_vec()).collect();
    let n = b.u8() % 5;
    let mut epids = Vec::new();
    for i in 0..n {
        let epid = i as u32 + 1;
        let nrecs = b.u8() % 7;
        let recs = (0..nrecs).map(|_| rec(&mut b)).collect();
        let size = b.u8() as u32 + 12;
        d.eprobes.insert(
            epid,
            EprobeDesc {
                epid,
                probe_id: epid,
                clause: epid,
                size,
                recs,
            },
        );
        d.probes.insert(
            epid,
            ProbeInfo {
                id: epid,
                provider: "fbt".into(),
                module: "m".into(),
                function: "f".into(),
                name: if i % 2 == 0 { "entry" } else { "return" }.into(),
            },
        );
        epids.push(epid);
    }
    if b.u8() & 1 == 1 {
        d.error_epids.insert(1);
    }
    if b.u8() & 1 == 1 {
        let _ = d.options.set("flowindent", None, false);
    }
    if let Ok(p) = d.add_program(&formats, &epids) {
        let types = print_types(&mut b);
        d.set_print_types(p, types);
    }
    let na = b.u8() % 3;
    for a in 0..na {
        let nrecs = b.u8() % 4 + 1;
        let recs = (0..nrecs).map(|_| rec(&mut b)).collect();
        d.aggs.add_desc(AggDesc {
            aggid: a as u32,
            varid: a as u32 % 2,
            epid: 1,
            recs,
        });
    }
    let mut aggrecs = Vec::new();
    for _ in 0..b.u8() % 4 {
        let aggid = (b.u8() % 3) as u32;
        let kl = b.u8() as usize % 40;
        let vl = [8usize, 16, 32, 127 * 8, 40][b.u8() as usize % 5];
        let key = (0..kl).map(|_| b.u8()).collect();
        let value = (0..vl).map(|_| b.u8()).collect();
        aggrecs.push(AggRecord {
            aggid,
            key,
            value,
            cpu: 0,
        });
    }
    let _ = d.aggs.merge(&aggrecs);
    let snap = BufferSnapshot {
        cpu: 0,
        data: b.0.to_vec(),
        drops: 1,
    };
    let mut out = Vec::new();
    // The structured formats (crate::oformat) read the same records and aggregations.
    match b.u8() % 3 {
        0 => {
            let mut o = DefaultOutput::default();
            let o = std::cell::RefCell::new(&mut o);
            let _ = d.consume_buffer(
                &snap,
                &mut out,
                &mut |pd, out| o.borrow_mut().probe(pd, out),
                &mut |pd, r, out| o.borrow_mut().record(pd, r, out),
                &mut |_| true,
                &mut |_| true,
            );
        }
        k => {
            let _ = d.options.set(
                "oformat",
                Some(if k == 1 { "json" } else { "folded" }),
                false,
            );
            let mut o = crate::oformat::json::JsonOutput::default();
            let o = std::cell::RefCell::new(&mut o);
            let _ = d.consume_buffer(
                &snap,
                &mut out,
                &mut |pd, out| o.borrow_mut().probe(pd, out),
                &mut |pd, r, out| o.borrow_mut().record(pd, r, out),
                &mut |_| true,
                &mut |_| true,
            );
            let _ = crate::oformat::metrics_text(&d);
            let _ = crate::oformat::stack_lines(&d);
        }
    }
    let _ = d.print_all_aggregations(&mut out);
}

/// Parses a format string from `data` (up to the first NUL) and formats the rest as records.
pub fn format_bytes(data: &[u8]) {
    let (fmt, rest) = match data.iter().position(|&c| c == 0) {
        Some(n) => (&data[..n], &data[n + 1..]),
        None => (data, &[][..]),
    };
    let Ok(f) = PrintfFormat::parse(fmt) else {
        return;
    };
    let mut b = Bytes(rest);
    let recs: Vec<RecDesc> = (0..b.u8() % 8).map(|_| rec(&mut b)).collect();
    let action = ACTIONS[b.u8() as usize % ACTIONS.len()];
    let body = b.0;
    let aggs = [AggValue {
        action,
        data: body,
        normal: 1 + (body.first().copied().unwrap_or(0) as u64 % 3),
    }];
    let env = FmtEnv {
        symbols: &NoSymbols,
        stackindent: 14,
        target: 0,
        style: crate::quantize::GraphStyle::default(),
        agghist: false,
        aggpack: false,
        zone: &crate::timefmt::Zone::Utc,
    };
    let mut out = Vec::new();
    let _ = f.format(&mut out, &env, &recs, body, &aggs);
    let _ = ConsumeAction::This;
}
