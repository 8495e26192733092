//! A minimal reader of the kernel's BTF (`/sys/kernel/btf/vmlinux`): enough to find a struct member's
//! byte offset (e.g. `task_struct.real_parent`, `task_struct.tgid`) so capture programs can read the
//! probe context the kernel does not hand to tracepoints (ppid). Full BTF-to-CTF conversion belongs to
//! the `ctf` crate, whose parser reads and validates the blob's framing here too; this keeps only
//! what capture needs. BTF is outside data: every bound is checked.

use crate::error::{LinuxError, Result};

const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_TYPEDEF: u32 = 8;
const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ENUM: u32 = 6;
const KIND_FWD: u32 = 7;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_ENUM64: u32 = 19;
/// The most types we walk.
pub const MAX_TYPES: usize = 1 << 22;

/// One struct or union member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Name (empty for anonymous members).
    pub name: String,
    /// Type id.
    pub type_id: u32,
    /// Offset in bits.
    pub bit_offset: u32,
}

#[derive(Clone, Debug)]
struct TypeRec {
    name_off: u32,
    kind: u32,
    /// Size, or the type referred to (pointers, typedefs, qualifiers, functions).
    size: u32,
    members: Vec<Member>,
    /// Parameter types of a function prototype; an integer's encoding as the only element.
    params: Vec<u32>,
}

/// Parsed BTF: the struct and union types and their members (other kinds kept as placeholders so
/// type ids stay right).
#[derive(Debug)]
pub struct Btf {
    types: Vec<TypeRec>,
    strings: Vec<u8>,
    /// For a module's split BTF: the kernel's BTF, whose types and strings this one continues
    /// (`types` then start at id `base.len()`, `strings` at offset `base.strings.len()`).
    base: Option<std::sync::Arc<Btf>>,
}

fn bad(reason: impl Into<String>) -> LinuxError {
    LinuxError::BadFile {
        path: "BTF".into(),
        reason: reason.into(),
    }
}

/// Parses of the kernel's BTF so far (see [`Btf::vmlinux_parses`]).
static VMLINUX_PARSES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Btf {
    /// The running kernel's BTF, read and parsed once while anyone holds it (about 35 ms and
    /// 16 MiB for a distribution kernel's): a session holds it while it enables probes (see
    /// `Session::attach_pending`), so the users of one enabling share one parse (the syscall
    /// functions, typed tracepoints, task and clock offsets, the fbt catalog).
    pub fn load_vmlinux() -> Result<std::sync::Arc<Btf>> {
        static SHARED: crate::held::HeldOnce<(), Btf> = crate::held::HeldOnce::new();
        SHARED.get_or_load((), |_| {
            let data = std::fs::read("/sys/kernel/btf/vmlinux").map_err(|e| {
                LinuxError::Unavailable(format!("kernel BTF (/sys/kernel/btf/vmlinux): {e}"))
            })?;
            let btf = Self::parse(&data)?;
            VMLINUX_PARSES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(btf)
        })
    }

    /// How many times this process has parsed the kernel's BTF ([`Btf::load_vmlinux`]).
    pub fn vmlinux_parses() -> usize {
        VMLINUX_PARSES.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Reads module `module`'s split BTF (`/sys/kernel/btf/<module>`) on top of the kernel's.
    pub fn load_module(module: &str, vmlinux: std::sync::Arc<Btf>) -> Result<Btf> {
        if module.is_empty() || module.contains('/') || module.starts_with('.') {
            return Err(bad(format!("bad module name {module:?}")));
        }
        let path = format!("/sys/kernel/btf/{module}");
        let data = std::fs::read(&path)
            .map_err(|e| LinuxError::Unavailable(format!("module BTF ({path}): {e}")))?;
        Self::parse_split(&data, Some(vmlinux))
    }

    /// Parses BTF bytes (little-endian).
    pub fn parse(b: &[u8]) -> Result<Btf> {
        Self::parse_split(b, None)
    }

    /// Parses BTF bytes (little-endian) whose type ids and string offsets continue those of
    /// `base` when given (a module's split BTF over the kernel's).
    pub fn parse_split(b: &[u8], base: Option<std::sync::Arc<Btf>>) -> Result<Btf> {
        use dtrace_ctf::btf::Btf as Raw;
        // The framing (header, sections, each kind's record) is the ctf crate's, which validates
        // it; a split blob's references into its base are checked here, as they are used.
        let raw = match &base {
            None => Raw::parse(b),
            Some(bb) => {
                let types = u32::try_from(bb.len()).map_err(|_| bad("too many types"))?;
                let strings =
                    u32::try_from(bb.strings.len()).map_err(|_| bad("string table too large"))?;
                Raw::parse_over(b, types, strings)
            }
        }
        .map_err(|e| bad(e.to_string()))?;
        if raw.types.len() > MAX_TYPES {
            return Err(bad("too many types"));
        }
        let strings = raw.string_section().to_vec();
        // A split blob's types start after its base's (whose void type 0 it shares).
        let mut types = Vec::with_capacity(raw.types.len() + 1);
        if base.is_none() {
            types.push(TypeRec {
                name_off: 0,
                kind: 0,
                size: 0,
                members: Vec::new(),
                params: Vec::new(),
            });
        }
        let base_strings = base.as_ref().map_or(0, |b| b.strings.len());
        for (i, t) in raw.types.iter().enumerate() {
            let id = raw.first_id + i as u32;
            let vlen = t.vlen as usize;
            let word = |i: usize| raw.word(t, i, id);
            let mut members = Vec::new();
            let mut params = Vec::new();
            match t.kind {
                KIND_FUNC_PROTO => params.extend((0..vlen).map(|m| word(2 * m + 1))),
                KIND_INT => params.push(word(0)),
                KIND_FWD => params.push(u32::from(t.kind_flag)),
                KIND_STRUCT | KIND_UNION => {
                    for m in 0..vlen {
                        let (name_off, off) = (word(3 * m), word(3 * m + 2));
                        let name = match (&base, name_off.checked_sub(base_strings as u32)) {
                            (Some(_), Some(own)) => str_at(&strings, own),
                            (Some(b), None) => b.name(name_off),
                            (None, _) => str_at(&strings, name_off),
                        };
                        members.push(Member {
                            name: name.to_string(),
                            type_id: word(3 * m + 1),
                            bit_offset: if t.kind_flag { off & 0x00ff_ffff } else { off },
                        });
                    }
                }
                _ => {}
            }
            types.push(TypeRec {
                name_off: t.name_off,
                kind: t.kind,
                size: t.size_or_type,
                members,
                params,
            });
        }
        Ok(Btf {
            types,
            strings,
            base,
        })
    }

    /// The id of this blob's first own type: 0 (void) for the kernel's, the base's length for a
    /// module's split BTF.
    pub fn first_id(&self) -> u32 {
        self.base.as_ref().map_or(0, |b| b.len() as u32)
    }

    /// Number of types (plus the void type 0), the base's included.
    pub fn len(&self) -> usize {
        self.first_id() as usize + self.types.len()
    }

    /// Whether there are no types besides void.
    pub fn is_empty(&self) -> bool {
        self.len() <= 1
    }

    /// Type `id`, in this blob or its base.
    fn ty(&self, id: u32) -> Option<&TypeRec> {
        match (&self.base, id.checked_sub(self.first_id())) {
            (Some(_), Some(own)) => self.types.get(own as usize),
            (Some(b), None) => b.ty(id),
            (None, _) => self.types.get(id as usize),
        }
    }

    /// The string at offset `off` of this blob's string table (continuing its base's).
    fn name(&self, off: u32) -> &str {
        match &self.base {
            Some(b) => match off.checked_sub(b.strings.len() as u32) {
                Some(own) => str_at(&self.strings, own),
                None => b.name(off),
            },
            None => str_at(&self.strings, off),
        }
    }

    /// This blob's own types with their ids (a split blob's base not included).
    fn own_types(&self) -> impl Iterator<Item = (u32, &TypeRec)> {
        let first = self.first_id();
        self.types
            .iter()
            .enumerate()
            .map(move |(i, t)| (first + i as u32, t))
    }

    /// The id of the complete struct named `name`.
    pub fn struct_id(&self, name: &str) -> Option<u32> {
        self.own_types()
            .find(|(_, t)| t.kind == KIND_STRUCT && t.size > 0 && self.name(t.name_off) == name)
            .map(|(i, _)| i)
            .or_else(|| self.base.as_ref()?.struct_id(name))
    }

    /// The id of the variable named `name` (the kernel's BTF lists its per-CPU variables) and the
    /// id of its type.
    pub fn var(&self, name: &str) -> Option<(u32, u32)> {
        self.own_types()
            .find(|(_, t)| t.kind == KIND_VAR && self.name(t.name_off) == name)
            .map(|(i, t)| (i, t.size))
            .or_else(|| self.base.as_ref()?.var(name))
    }

    /// The id of the typedef named `name` (e.g. `btf_trace_sched_switch`, which typed raw
    /// tracepoint programs attach by).
    pub fn typedef_id(&self, name: &str) -> Option<u32> {
        self.own_types()
            .find(|(_, t)| t.kind == KIND_TYPEDEF && self.name(t.name_off) == name)
            .map(|(i, _)| i)
            .or_else(|| self.base.as_ref()?.typedef_id(name))
    }

    /// The byte offset of member `member` in struct/union `id`, looking through anonymous members
    /// (at most 8 levels deep and a bounded number of members visited, whatever the input).
    pub fn member_offset(&self, id: u32, member: &str) -> Option<u32> {
        let mut budget = 100_000usize;
        self.member_offset_depth(id, member, 0, &mut budget)
    }

    fn member_offset_depth(
        &self,
        id: u32,
        member: &str,
        depth: usize,
        budget: &mut usize,
    ) -> Option<u32> {
        if depth > 8 {
            return None;
        }
        let t = self.ty(id)?;
        for m in &t.members {
            *budget = budget.checked_sub(1)?;
            if m.name == member {
                return Some(m.bit_offset / 8);
            }
        }
        for m in t.members.iter().filter(|m| m.name.is_empty()) {
            *budget = budget.checked_sub(1)?;
            let inner = self.ty(m.type_id)?;
            if inner.kind == KIND_STRUCT || inner.kind == KIND_UNION {
                if let Some(o) = self.member_offset_depth(m.type_id, member, depth + 1, budget) {
                    return Some(m.bit_offset / 8 + o);
                }
            }
        }
        None
    }
}

/// A kernel function's signature as `fbt` types it: each parameter's and the return value's type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncSignature {
    /// Parameter types, first to last.
    pub params: Vec<ValueType>,
    /// The return type (`None`: `void`).
    pub ret: Option<ValueType>,
    /// Whether the function takes variable arguments (`...`).
    pub variadic: bool,
}

/// The type of a value passed in a register.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueType {
    /// The C type (`struct file *`, `size_t`).
    pub native: String,
    /// The type D gives it: pointers keep their C type, integers become `intN_t`/`uintN_t`.
    pub dtype: String,
    /// Whether it fits a register (pointers, integers, enums); structs passed by value do not.
    pub scalar: bool,
}

impl Btf {
    /// The ids of every function (`FUNC` record) by name (the first of a name wins).
    pub fn func_ids(&self) -> std::collections::HashMap<String, u32> {
        self.func_index().0
    }

    /// The ids of every function by name (the first of a name wins), and the names that several
    /// `FUNC` records share (static functions of one name and different prototypes). For a
    /// module's split BTF, only the module's own functions.
    pub fn func_index(
        &self,
    ) -> (
        std::collections::HashMap<String, u32>,
        std::collections::HashSet<String>,
    ) {
        let mut m = std::collections::HashMap::new();
        let mut several = std::collections::HashSet::new();
        for (i, t) in self.own_types() {
            if t.kind == KIND_FUNC {
                let name = self.name(t.name_off);
                if m.contains_key(name) {
                    several.insert(name.to_string());
                } else {
                    m.insert(name.to_string(), i);
                }
            }
        }
        (m, several)
    }

    /// The signature of function `func_id` (a `FUNC` record); `None` when it is not one or its
    /// prototype is malformed.
    pub fn func_signature(&self, func_id: u32) -> Option<FuncSignature> {
        let f = self.ty(func_id)?;
        if f.kind != KIND_FUNC {
            return None;
        }
        let proto = self.ty(f.size)?;
        if proto.kind != KIND_FUNC_PROTO {
            return None;
        }
        // A variadic prototype ends with a parameter of type void.
        let params = proto
            .params
            .iter()
            .filter(|&&t| t != 0)
            .map(|&t| self.value_type(t))
            .collect();
        let ret = (proto.size != 0).then(|| self.value_type(proto.size));
        let variadic = proto.params.last() == Some(&0);
        Some(FuncSignature {
            params,
            ret,
            variadic,
        })
    }

    fn value_type(&self, id: u32) -> ValueType {
        let native = self.type_name(id, 0);
        let (kind, size, signed) = self.resolve(id);
        let (dtype, scalar) = match kind {
            KIND_PTR => (native.clone(), true),
            KIND_INT | KIND_ENUM | KIND_ENUM64 if matches!(size, 1 | 2 | 4 | 8) => {
                let u = if signed { "" } else { "u" };
                (format!("{u}int{}_t", size * 8), true)
            }
            _ => (native.clone(), false),
        };
        ValueType {
            native,
            dtype,
            scalar,
        }
    }

    /// Kind, size and signedness of `id` once typedefs and qualifiers are looked through.
    fn resolve(&self, mut id: u32) -> (u32, u32, bool) {
        for _ in 0..32 {
            let Some(t) = self.ty(id) else {
                break;
            };
            match t.kind {
                KIND_TYPEDEF | 9 | 10 | 11 | 18 => id = t.size,
                KIND_PTR => return (KIND_PTR, 8, false),
                KIND_INT => {
                    let enc = t.params.first().copied().unwrap_or(0);
                    return (KIND_INT, t.size, (enc >> 24) & 1 == 1);
                }
                KIND_ENUM | KIND_ENUM64 => return (t.kind, t.size, false),
                k => return (k, t.size, false),
            }
        }
        (0, 0, false)
    }

    /// The C name of type `id` (qualifiers and type tags left out; anonymous and function types
    /// pointed at become `void`).
    pub fn type_name(&self, id: u32, depth: usize) -> String {
        let Some(t) = self.ty(id).filter(|_| depth < 32) else {
            return "void".into();
        };
        let name = self.name(t.name_off);
        match t.kind {
            KIND_PTR => {
                let inner = self.type_name(t.size, depth + 1);
                if inner.ends_with('*') {
                    format!("{inner}*")
                } else {
                    format!("{inner} *")
                }
            }
            9 | 10 | 11 | 18 => self.type_name(t.size, depth + 1),
            _ if name.is_empty() => "void".into(),
            KIND_STRUCT => format!("struct {name}"),
            KIND_UNION => format!("union {name}"),
            KIND_ENUM | KIND_ENUM64 => format!("enum {name}"),
            KIND_FWD if t.params.first() == Some(&1) => format!("union {name}"),
            KIND_FWD => format!("struct {name}"),
            _ => name.to_string(),
        }
    }
}

fn str_at(strings: &[u8], off: u32) -> &str {
    let Some(rest) = strings.get(off as usize..) else {
        return "";
    };
    let end = rest.iter().position(|b| *b == 0).unwrap_or(rest.len());
    std::str::from_utf8(&rest[..end]).unwrap_or("")
}

/// Offsets in `struct task_struct` that capture programs use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskOffsets {
    /// `real_parent` (a `struct task_struct *`).
    pub real_parent: u32,
    /// `tgid`.
    pub tgid: u32,
    /// `se.sum_exec_runtime` (the thread's on-CPU nanoseconds, for `vtimestamp`), when found.
    pub sum_exec_runtime: Option<u32>,
    /// What a program needs to describe a task other than the current one (`on-cpu`'s incoming
    /// thread), when found.
    pub other: Option<OtherTaskOffsets>,
    /// `exit_code` (the wait status the task exits with), when found.
    pub exit_code: Option<u32>,
    /// `normal_prio` and `prio` (the priority without and with inheritance), when found.
    pub prios: Option<(u32, u32)>,
    /// `mm` and, in `struct mm_struct`, `arg_start` and `arg_end` (the process's argument area),
    /// when found.
    pub args_area: Option<ArgsAreaOffsets>,
    /// What a `d_path()` walk reads (dentries, mounts, `task_struct.fs`), when found.
    pub paths: Option<crate::capture::path::PathOffsets>,
}

/// Offsets to read a task's identity from its `task_struct` (rather than through the helpers that
/// only see the current task).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OtherTaskOffsets {
    /// `task_struct.pid` (the thread id).
    pub pid: u32,
    /// `task_struct.comm`.
    pub comm: u32,
    /// `task_struct.cred` (a `const struct cred *`).
    pub cred: u32,
    /// `cred.uid` (a `kuid_t`, whose first member is the id).
    pub uid: u32,
    /// `cred.gid`.
    pub gid: u32,
}

/// Where a process's argument strings are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgsAreaOffsets {
    /// `task_struct.mm`.
    pub mm: u32,
    /// `mm_struct.arg_start`.
    pub arg_start: u32,
    /// `mm_struct.arg_end`.
    pub arg_end: u32,
}

impl TaskOffsets {
    /// The running kernel's, read from its BTF once per process: planning and enabling a probe
    /// then agree on what the probe's program can read (`ppid`, `vtimestamp`, ...).
    pub fn of_running_kernel() -> Option<TaskOffsets> {
        static OFFSETS: std::sync::OnceLock<Option<TaskOffsets>> = std::sync::OnceLock::new();
        *OFFSETS.get_or_init(|| Self::from_vmlinux().ok())
    }

    /// From the running kernel's BTF.
    pub fn from_vmlinux() -> Result<TaskOffsets> {
        let btf = Btf::load_vmlinux()?;
        Self::from_btf(&btf)
    }

    /// From parsed BTF.
    pub fn from_btf(btf: &Btf) -> Result<TaskOffsets> {
        let id = btf
            .struct_id("task_struct")
            .ok_or_else(|| bad("no struct task_struct"))?;
        Ok(TaskOffsets {
            real_parent: btf
                .member_offset(id, "real_parent")
                .ok_or_else(|| bad("no task_struct.real_parent"))?,
            tgid: btf
                .member_offset(id, "tgid")
                .ok_or_else(|| bad("no task_struct.tgid"))?,
            sum_exec_runtime: btf.member_offset(id, "se").and_then(|se| {
                let sid = btf.struct_id("sched_entity")?;
                Some(se + btf.member_offset(sid, "sum_exec_runtime")?)
            }),
            other: (|| {
                let cid = btf.struct_id("cred")?;
                Some(OtherTaskOffsets {
                    pid: btf.member_offset(id, "pid")?,
                    comm: btf.member_offset(id, "comm")?,
                    cred: btf.member_offset(id, "cred")?,
                    uid: btf.member_offset(cid, "uid")?,
                    gid: btf.member_offset(cid, "gid")?,
                })
            })(),
            exit_code: btf.member_offset(id, "exit_code"),
            prios: btf
                .member_offset(id, "normal_prio")
                .zip(btf.member_offset(id, "prio")),
            args_area: (|| {
                let mid = btf.struct_id("mm_struct")?;
                Some(ArgsAreaOffsets {
                    mm: btf.member_offset(id, "mm")?,
                    arg_start: btf.member_offset(mid, "arg_start")?,
                    arg_end: btf.member_offset(mid, "arg_end")?,
                })
            })(),
            paths: crate::capture::path::offsets_from_btf(btf, id),
        })
    }
}

/// Where the current process's initial stack pointer is (`task_struct.mm`, then
/// `mm_struct.start_stack`): the stack above it holds the arguments and the environment, not
/// frames, so a copy of the main thread's stack need not go further (see
/// `capture::codegen::emit_user_unwind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackTopOffsets {
    /// `task_struct.mm`.
    pub mm: u32,
    /// `mm_struct.start_stack`.
    pub start_stack: u32,
}

impl StackTopOffsets {
    /// The running kernel's, read from its BTF once per process.
    pub fn of_running_kernel() -> Option<StackTopOffsets> {
        static OFFSETS: std::sync::OnceLock<Option<StackTopOffsets>> = std::sync::OnceLock::new();
        *OFFSETS.get_or_init(|| {
            let btf = Btf::load_vmlinux().ok()?;
            Some(StackTopOffsets {
                mm: btf.member_offset(btf.struct_id("task_struct")?, "mm")?,
                start_stack: btf.member_offset(btf.struct_id("mm_struct")?, "start_stack")?,
            })
        })
    }
}

/// Offsets that name the file a `struct vm_area_struct` maps, as `bpf_find_vma()`'s callback
/// reads them (the user stack walk's files, see `capture::uunwind`): its start and page offset,
/// and its file's device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VmaFileOffsets {
    /// `vm_area_struct.vm_start`.
    pub vm_start: u32,
    /// `vm_area_struct.vm_pgoff`.
    pub vm_pgoff: u32,
    /// `vm_area_struct.vm_file` (a `struct file *`).
    pub vm_file: u32,
    /// `file.f_inode`.
    pub f_inode: u32,
    /// `inode.i_ino`.
    pub i_ino: u32,
    /// `inode.i_sb` (a `struct super_block *`).
    pub i_sb: u32,
    /// `super_block.s_dev`.
    pub s_dev: u32,
}

impl VmaFileOffsets {
    /// The running kernel's, read from its BTF once per process.
    pub fn of_running_kernel() -> Option<VmaFileOffsets> {
        static OFFSETS: std::sync::OnceLock<Option<VmaFileOffsets>> = std::sync::OnceLock::new();
        *OFFSETS.get_or_init(|| Self::from_btf(&*Btf::load_vmlinux().ok()?))
    }

    /// From parsed BTF.
    pub fn from_btf(btf: &Btf) -> Option<VmaFileOffsets> {
        let vma = btf.struct_id("vm_area_struct")?;
        let file = btf.struct_id("file")?;
        let inode = btf.struct_id("inode")?;
        let sb = btf.struct_id("super_block")?;
        Some(VmaFileOffsets {
            vm_start: btf.member_offset(vma, "vm_start")?,
            vm_pgoff: btf.member_offset(vma, "vm_pgoff")?,
            vm_file: btf.member_offset(vma, "vm_file")?,
            f_inode: btf.member_offset(file, "f_inode")?,
            i_ino: btf.member_offset(inode, "i_ino")?,
            i_sb: btf.member_offset(inode, "i_sb")?,
            s_dev: btf.member_offset(sb, "s_dev")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error() {
        assert!(Btf::parse(b"").is_err());
        assert!(Btf::parse(&[
            0x9f, 0xeb, 1, 0, 24, 0, 0, 0, 0, 0, 0, 0, 99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
        ])
        .is_err());
    }

    /// A BTF blob of `types` (already encoded) and `strings`.
    fn blob(types: &[u32], strings: &[u8]) -> Vec<u8> {
        let tlen = (types.len() * 4) as u32;
        let mut b = vec![0x9f, 0xeb, 1, 0];
        for w in [24, 0, tlen, tlen, strings.len() as u32] {
            b.extend_from_slice(&u32::to_le_bytes(w));
        }
        for w in types {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(strings);
        b
    }

    #[test]
    fn split_btf_continues_its_bases_ids_and_strings() {
        // Base: 1 int, 2 struct base_s { int a; }.
        let base_strings = b"\0int\0base_s\0a\0";
        let base = blob(
            &[
                1,
                1 << 24,
                4,
                (1 << 24) | 32, // int: signed, 32 bits
                5,
                (4 << 24) | 1,
                4,
                12,
                1,
                0, // struct base_s { int a; }
            ],
            base_strings,
        );
        let base = std::sync::Arc::new(Btf::parse(&base).unwrap());
        assert_eq!(base.len(), 3);
        // Module: 3 struct mod_s { int b; struct base_s *c; }, 4 base_s *, 5 mod_s *,
        // 6 int (struct mod_s *), 7 func mod_fn.
        let o = base_strings.len() as u32;
        let module = blob(
            &[
                o,
                (4 << 24) | 2,
                16,
                o + 6,
                1,
                0,
                o + 8,
                4,
                64, // struct mod_s
                0,
                2 << 24,
                2, // base_s *
                0,
                2 << 24,
                3, // mod_s *
                0,
                (13 << 24) | 1,
                1,
                0,
                5, // int (struct mod_s *)
                o + 10,
                12 << 24,
                6, // mod_fn
            ],
            b"mod_s\0b\0c\0mod_fn\0",
        );
        let m = Btf::parse_split(&module, Some(base)).unwrap();
        assert_eq!((m.first_id(), m.len()), (3, 8));
        let (ids, several) = m.func_index();
        assert_eq!(ids.get("mod_fn"), Some(&7));
        assert!(several.is_empty() && !ids.contains_key("int"));
        let sig = m.func_signature(7).unwrap();
        assert_eq!(sig.params[0].native, "struct mod_s *");
        assert_eq!(sig.ret.unwrap().dtype, "int32_t");
        assert_eq!(m.struct_id("mod_s"), Some(3));
        assert_eq!(m.struct_id("base_s"), Some(2));
        assert_eq!(m.member_offset(3, "c"), Some(8));
        assert_eq!(m.type_name(4, 0), "struct base_s *");
        // A split blob's string offsets past its own table are refused, without a panic.
        let bad = blob(&[o + 99, (4 << 24), 0], b"x\0");
        let b2 = std::sync::Arc::new(Btf::parse(&blob(&[], b"\0")).unwrap());
        let err = Btf::parse_split(&bad, Some(b2)).unwrap_err();
        assert!(err.to_string().contains("string"), "{err}");
    }

    #[test]
    fn task_struct_offsets_from_the_running_kernel() {
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            return;
        }
        let t = TaskOffsets::from_vmlinux().unwrap();
        assert!(t.real_parent > 0 && t.tgid > 0 && t.real_parent != t.tgid);
        assert!(t.sum_exec_runtime.is_some());
        let o = t.other.unwrap();
        assert!(o.pid != t.tgid && o.comm > 0 && o.cred > 0 && o.uid != o.gid);
        assert!(t.exit_code.is_some());
        let a = t.args_area.unwrap();
        assert_eq!(a.arg_end, a.arg_start + 8);
    }
}
