//! Entry points shared by the cargo-fuzz targets (`crates/framework/fuzz`) and the fuzz smoke tests:
//! they turn arbitrary bytes into option values, probe descriptions, record bytes and whole programs
//! (random DIF included) and drive the framework with them. Nothing here may panic, hang or allocate
//! without bound, whatever the bytes.

use crate::context::FiringContext;
use crate::framework::{Framework, ManualClock};
use crate::options::{parse_rate, parse_size, Options};
use crate::records::{read_header, FaultRecord};

use dtrace_dif::object::{DifObject, DifType, VarEntry, DIF_TF_BYREF, DIF_TF_BYUREF};
use dtrace_dif::program::{ActionDesc, ActionKind, EcbDesc, ProbeDesc, Program};

/// Reads bytes as a stream of small decisions.
struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        (self.u32() as u64) << 32 | self.u32() as u64
    }
    fn pick<'s, T>(&mut self, from: &'s [T]) -> &'s T {
        &from[self.u8() as usize % from.len()]
    }
    fn str(&mut self, max: usize) -> String {
        let n = self.u8() as usize % (max + 1);
        (0..n).map(|_| (self.u8() % 95 + 32) as char).collect()
    }
}

/// Option values, globs and probe names, and record decoding.
pub fn parse_inputs(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = parse_size(&text);
    let _ = parse_rate(&text);
    let _ = crate::providers::profile::parse_probe_name(&text);
    let mut o = Options::default();
    for name in crate::options::FRAMEWORK_OPTIONS {
        let _ = o.set(name, Some(&text));
    }
    let (pat, s) = data.split_at(data.len() / 2);
    let _ = crate::glob::gmatch(pat, s);
    let _ = crate::glob::field_matches(&String::from_utf8_lossy(pat), &String::from_utf8_lossy(s));
    let _ = FaultRecord::decode(data);
    let _ = read_header(data);
    let size_of = |e: u32| (!e.is_multiple_of(7)).then_some(e % 64);
    for r in crate::records::RecordIter::new(data, size_of) {
        if r.is_err() {
            break;
        }
    }
}

const KINDS: &[ActionKind] = &[
    ActionKind::None,
    ActionKind::DifExpr,
    ActionKind::DifExpr,
    ActionKind::DifExpr,
    ActionKind::Exit,
    ActionKind::Printf,
    ActionKind::Printa,
    ActionKind::LibAct,
    ActionKind::Tracemem,
    ActionKind::Ustack,
    ActionKind::Jstack,
    ActionKind::Usym,
    ActionKind::Stack,
    ActionKind::Sym,
    ActionKind::Stop,
    ActionKind::Raise,
    ActionKind::System,
    ActionKind::Speculate,
    ActionKind::Commit,
    ActionKind::Discard,
    ActionKind::AggCount,
    ActionKind::AggMin,
    ActionKind::AggMax,
    ActionKind::AggAvg,
    ActionKind::AggSum,
    ActionKind::AggStddev,
    ActionKind::AggQuantize,
    ActionKind::AggLquantize,
    ActionKind::AggLlquantize,
];

const PROBES: &[&str] = &[
    "dtrace:::BEGIN",
    "dtrace:::END",
    "dtrace:::ERROR",
    "profile:::tick-1",
    "profile:::profile-97",
    ":::*",
    "dtrace:::[BE]*",
    "nosuch:::probe",
];

fn difo(b: &mut Bytes<'_>) -> DifObject {
    use dtrace_dif::{Instr, Opcode};
    let reg = |b: &mut Bytes<'_>| b.u8() % 8;
    let dest = |b: &mut Bytes<'_>| 1 + b.u8() % 7;
    let ninst = b.u8() as usize % 8;
    let mut text: Vec<u32> = Vec::with_capacity(ninst + 1);
    // Mostly well-formed instructions (so objects pass the verifier and run), some raw words.
    for _ in 0..ninst {
        let ins = match b.u8() % 16 {
            0 => Instr::Setx {
                idx: (b.u8() % 2) as u16,
                rd: dest(b),
            },
            1 | 2 => Instr::Alu {
                op: *b.pick(&[
                    Opcode::Add,
                    Opcode::Sub,
                    Opcode::Mul,
                    Opcode::Sdiv,
                    Opcode::Urem,
                    Opcode::Sll,
                ]),
                r1: reg(b),
                r2: reg(b),
                rd: dest(b),
            },
            3 => Instr::LoadVar {
                op: Opcode::Ldgs,
                var: *b.pick(&[0x106, 0x107, 0x101, 0x115, 0x118, 0x116, 0x104]),
                rd: dest(b),
            },
            4 => Instr::Load {
                op: *b.pick(&[Opcode::Ldx, Opcode::Ldsw, Opcode::Ldub]),
                r1: reg(b),
                rd: dest(b),
            },
            5 => Instr::Call {
                subr: *b.pick(&[10, 12, 23, 24, 25, 0, 8, 9]),
                rd: dest(b),
            },
            6 => Instr::Sets {
                idx: 0,
                rd: dest(b),
            },
            7..=13 => Instr::LoadVar {
                op: *b.pick(&[Opcode::Ldgs, Opcode::Ldts, Opcode::Ldls]),
                var: 0x500 + (b.u8() % 2) as u16,
                rd: dest(b),
            },
            14 => Instr::StoreVar {
                op: *b.pick(&[Opcode::Stgs, Opcode::Stts, Opcode::Stls]),
                var: 0x500 + (b.u8() % 2) as u16,
                rs: reg(b),
            },
            _ => {
                text.push(b.u32());
                continue;
            }
        };
        text.push(ins.encode());
    }
    if !b.u8().is_multiple_of(32) {
        text.push(Instr::Ret { rd: reg(b) }.encode());
    }
    let inttab = (0..2).map(|_| b.u64()).collect();
    let mut strtab: Vec<u8> = (0..b.u8() % 24).map(|_| b.u8() % 4 * 40).collect();
    strtab.push(0);
    // Both user variables in every scope, so loads and stores of them verify.
    let vartab = (0..6u32)
        .map(|i| VarEntry {
            name: 0,
            id: 0x500 + i % 2,
            kind: dtrace_dif::object::DIFV_KIND_SCALAR,
            scope: (i / 2) as u8,
            flags: 3,
            ty: DifType::integer(8),
        })
        .collect();
    let rtype = match b.u8() % 6 {
        0 => DifType::string(0),
        1 => DifType::string(b.u8() as u32),
        2 => DifType {
            flags: DIF_TF_BYREF,
            size: b.u8() as u32,
            ..DifType::integer(0)
        },
        3 => DifType {
            flags: DIF_TF_BYUREF,
            size: b.u8() as u32 % 32,
            ..DifType::integer(0)
        },
        4 => DifType::integer(*b.pick(&[0, 1, 2, 4, 8])),
        _ => DifType::integer(8),
    };
    DifObject {
        text,
        inttab,
        strtab,
        vartab,
        rtype,
    }
}

fn probe_desc(s: &str) -> ProbeDesc {
    let mut f = s.split(':');
    let mut next = || f.next().unwrap_or("").to_string();
    ProbeDesc {
        provider: next(),
        module: next(),
        function: next(),
        name: next(),
    }
}

/// Builds a random program (random DIF included) and options from bytes, enables it, and drives a
/// short session: BEGIN, a few tick firings with random arguments, timers, END, buffer and
/// aggregation snapshots. Returns whether tracing started (for coverage checks).
pub fn fire_program(data: &[u8]) -> bool {
    let mut b = Bytes { data, pos: 0 };
    let mut ecbs = Vec::new();
    for _ in 0..1 + b.u8() % 3 {
        let predicate = b.u8().is_multiple_of(3).then(|| difo(&mut b));
        let actions = (0..b.u8() % 6)
            .map(|_| {
                let kind = *b.pick(KINDS);
                ActionDesc {
                    kind,
                    difo: (!b.u8().is_multiple_of(5)).then(|| difo(&mut b)),
                    arg: match b.u8() % 4 {
                        0 => 0,
                        1 => b.u8() as u64,
                        2 => dtrace_dif::program::lquantize_arg(
                            b.u8() as i8 as i32,
                            b.u8() as u16,
                            b.u8() as u16,
                        ),
                        _ => b.u64(),
                    },
                    uarg: b.u8() as u64 % 3,
                    ntuple: b.u8() as u32 % 3,
                }
            })
            .collect();
        ecbs.push(EcbDesc {
            probe: probe_desc(PROBES[b.u8() as usize % PROBES.len()]),
            predicate,
            actions,
            line: 0,
        });
    }
    let mut options = Vec::new();
    for _ in 0..b.u8() % 3 {
        let name = *b.pick(&[
            "bufsize",
            "bufpolicy",
            "nspec",
            "specsize",
            "strsize",
            "aggsize",
            "destructive",
            "cpu",
        ]);
        let value = match name {
            "bufpolicy" => b.pick(&["switch", "fill", "ring", "x"]).to_string(),
            "bufsize" | "specsize" | "aggsize" => {
                b.pick(&["64", "256", "1k", "4k", "0"]).to_string()
            }
            "destructive" => b.pick(&["1", "0", "yes"]).to_string(),
            _ => (b.u8() % 4).to_string(),
        };
        options.push((name.to_string(), Some(value)));
    }
    let program = Program {
        ecbs,
        formats: vec!["%d".into()],
        aggregations: Vec::new(),
        options,
        attrs: Vec::new(),
        print_types: Vec::new(),
        providers: Vec::new(),
        max_tuple_size: 0,
        max_dvar_size: 0,
    };
    // chill() is left out of the action kinds: it really sleeps.
    let opts = Options {
        destructive: b.u8().is_multiple_of(2),
        ..Options::default()
    };
    let mut fw = Framework::new(opts, 2);
    let clock = ManualClock::default();
    clock.set(1);
    fw.set_clock(Box::new(clock.clone()));
    fw.set_fault_records(b.u8().is_multiple_of(2));
    if fw.enable(&program, b.u8().is_multiple_of(2)).is_err() {
        return false;
    }
    if fw.go().is_err() {
        return false;
    }
    let tick = fw
        .list_probes(&probe_desc("profile:::tick-1"))
        .first()
        .map(|p| p.id)
        .unwrap_or(0);
    for _ in 0..b.u8() % 4 {
        let mut ctx = FiringContext {
            pid: b.u8() as u64,
            tid: b.u8() as u64,
            execname: b.str(8),
            ..FiringContext::default()
        };
        for a in ctx.args.iter_mut() {
            *a = b.u64();
        }
        fw.fire(tick, b.u8() as u32 % 3, &ctx);
    }
    clock.set(3_000_000_000);
    fw.poll();
    fw.poll();
    let _ = fw.stop();
    for snap in fw.switch_all() {
        let size_of = |epid: u32| fw.eprobe(epid).map(|e| e.size);
        for r in crate::records::RecordIter::new(&snap.data, size_of) {
            // The framework's own buffers always decode.
            if let Err(e) = r {
                panic!("framework wrote an undecodable buffer: {e}");
            }
        }
    }
    let _ = fw.snapshot_aggregations();
    let _ = fw.status();
    true
}

/// A deterministic pseudo-random byte generator for the smoke tests (xorshift).
pub fn smoke_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
