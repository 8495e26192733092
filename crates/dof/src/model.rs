//! The decoded form of a DOF object: identification, section headers and typed section contents
//! (every kind of Table 6.1), in the published layouts.

use crate::consts::*;

/// The identification bytes of `dof_hdr_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DofIdent {
    /// `DOF_MODEL_ILP32` or `DOF_MODEL_LP64`.
    pub model: u8,
    /// `DOF_ENCODE_LSB` or `DOF_ENCODE_MSB`.
    pub encoding: u8,
    /// DOF version, 1 to 3.
    pub version: u8,
    /// DIF version.
    pub dif_version: u8,
    /// DIF integer registers.
    pub dif_ireg: u8,
    /// DIF tuple registers.
    pub dif_treg: u8,
}

impl Default for DofIdent {
    fn default() -> Self {
        DofIdent {
            model: DOF_MODEL_LP64,
            encoding: DOF_ENCODE_LSB,
            version: DOF_VERSION,
            dif_version: DIF_VERSION_2,
            dif_ireg: DIF_DIR_NREGS,
            dif_treg: DIF_DTR_NREGS,
        }
    }
}

/// `dtrace_diftype_t`: the type of a DIF value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DifType {
    /// `DIF_TYPE_CTF` or `DIF_TYPE_STRING`.
    pub kind: u8,
    /// CTF kind, for `DIF_TYPE_CTF`.
    pub ckind: u8,
    /// `DIF_TF_BYREF`, `DIF_TF_BYUREF`.
    pub flags: u8,
    /// Padding byte.
    pub pad: u8,
    /// Size in bytes.
    pub size: u32,
}

/// `dtrace_difv_t`: a variable-table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DifVar {
    /// Name: offset in the DIFO's string table.
    pub name: u32,
    /// Variable id.
    pub id: u32,
    /// `DIFV_KIND_ARRAY` or `DIFV_KIND_SCALAR`.
    pub kind: u8,
    /// `DIFV_SCOPE_*`.
    pub scope: u8,
    /// `DIFV_F_REF`, `DIFV_F_MOD`.
    pub flags: u16,
    /// Type.
    pub ty: DifType,
}

/// `dof_ecbdesc_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EcbDesc {
    /// Link to a `PROBEDESC` section.
    pub probes: u32,
    /// Link to the predicate's `DIFOHDR`, or `DOF_SECIDX_NONE`.
    pub pred: u32,
    /// Link to an `ACTDESC` section, or `DOF_SECIDX_NONE`.
    pub actions: u32,
    /// Padding.
    pub pad: u32,
    /// User argument.
    pub uarg: u64,
}

/// `dof_probedesc_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProbeDesc {
    /// Link to a `STRTAB` (or `DOF_SECIDX_NONE`).
    pub strtab: u32,
    /// Provider name offset.
    pub provider: u32,
    /// Module name offset.
    pub module: u32,
    /// Function name offset.
    pub function: u32,
    /// Probe name offset.
    pub name: u32,
    /// Probe id.
    pub id: u32,
}

/// `dof_actdesc_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ActDesc {
    /// Link to a `DIFOHDR`, or `DOF_SECIDX_NONE`.
    pub difo: u32,
    /// Link to a `STRTAB`, or `DOF_SECIDX_NONE`.
    pub strtab: u32,
    /// Action kind (`DTRACEACT_*`).
    pub kind: u32,
    /// Number of tuple elements.
    pub ntuple: u32,
    /// Action argument (a string offset when `strtab` is set).
    pub arg: u64,
    /// User argument.
    pub uarg: u64,
}

/// `dof_difohdr_t`: return type and the sections that make up one DIFO.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DifoHdr {
    /// Return type.
    pub rtype: DifType,
    /// Links to `DIF`, `INTTAB`, `STRTAB`, `VARTAB`, `TYPTAB`, `KRELHDR`/`URELHDR` sections.
    pub links: Vec<u32>,
}

/// `dof_relohdr_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RelocHdr {
    /// Link to a `STRTAB`.
    pub strtab: u32,
    /// Link to the `RELTAB`.
    pub relsec: u32,
    /// Link to the section the relocations apply to.
    pub tgtsec: u32,
}

/// `dof_relodesc_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RelocDesc {
    /// Symbol name offset.
    pub name: u32,
    /// `DOF_RELO_*`.
    pub kind: u32,
    /// Byte offset in the target section.
    pub offset: u64,
    /// Type-specific data.
    pub data: u64,
}

/// `dof_optdesc_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OptDesc {
    /// Option id (`DTRACEOPT_*`).
    pub option: u32,
    /// Link to a `STRTAB` for string options, or `DOF_SECIDX_NONE`.
    pub strtab: u32,
    /// Value, or string offset.
    pub value: u64,
}

/// `dof_provider_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Provider {
    /// Link to a `STRTAB`.
    pub strtab: u32,
    /// Link to a `PROBES` section.
    pub probes: u32,
    /// Link to a `PRARGS` section.
    pub prargs: u32,
    /// Link to a `PROFFS` section.
    pub proffs: u32,
    /// Provider name offset.
    pub name: u32,
    /// Provider stability attributes.
    pub provattr: u32,
    /// Module stability.
    pub modattr: u32,
    /// Function stability.
    pub funcattr: u32,
    /// Name stability.
    pub nameattr: u32,
    /// Argument stability.
    pub argsattr: u32,
    /// Link to a `PRENOFFS` section (version 2 and later; `None` for a version-1 provider record).
    pub prenoffs: Option<u32>,
}

/// `dof_probe_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Probe {
    /// Address (of the function, relocated).
    pub addr: u64,
    /// Function name offset.
    pub func: u32,
    /// Probe name offset.
    pub name: u32,
    /// Offset of the native argument type strings.
    pub nargv: u32,
    /// Offset of the translated argument type strings.
    pub xargv: u32,
    /// Index of the first argument mapping in `PRARGS`.
    pub argidx: u32,
    /// Index of the first offset in `PROFFS`.
    pub offidx: u32,
    /// Number of native arguments.
    pub nargc: u8,
    /// Number of translated arguments.
    pub xargc: u8,
    /// Number of offsets.
    pub noffs: u16,
    /// Index of the first is-enabled offset in `PRENOFFS`.
    pub enoffidx: u32,
    /// Number of is-enabled offsets.
    pub nenoffs: u16,
    /// Padding.
    pub pad1: u16,
    /// Padding.
    pub pad2: u32,
}

/// `dof_xlator_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Xlator {
    /// Link to an `XLMEMBERS` section.
    pub members: u32,
    /// Link to a `STRTAB`.
    pub strtab: u32,
    /// Offset of the argument type strings.
    pub argv: u32,
    /// Number of arguments.
    pub argc: u32,
    /// Offset of the output type string.
    pub ty: u32,
    /// Stability.
    pub attr: u32,
}

/// `dof_xlmember_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct XlMember {
    /// Link to the member's `DIFOHDR`.
    pub difo: u32,
    /// Member name offset.
    pub name: u32,
    /// Member type.
    pub ty: DifType,
}

/// `dof_xlref_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct XlRef {
    /// Link to an `XLIMPORT` section.
    pub xlator: u32,
    /// Member index.
    pub member: u32,
    /// Argument index.
    pub argn: u32,
}

/// The Solaris `struct utsname`: five NUL-padded fields of 257 bytes, kept as the bytes before each
/// field's first NUL (at most 256).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Utsname {
    /// sysname, nodename, release, version, machine.
    pub fields: [Vec<u8>; 5],
}

impl Utsname {
    /// From five strings (each cut to 256 bytes).
    pub fn new(fields: [&str; 5]) -> Utsname {
        Utsname {
            fields: fields
                .map(|f| f.as_bytes()[..f.len().min(crate::consts::size::UTS_FIELD - 1)].to_vec()),
        }
    }
    /// Field `i` as text (lossy).
    pub fn field(&self, i: usize) -> String {
        self.fields
            .get(i)
            .map_or(String::new(), |f| String::from_utf8_lossy(f).into_owned())
    }
}

/// The contents of a section, typed by its section type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SectionData {
    /// `DOF_SECT_NONE` (its bytes, normally none).
    None(Vec<u8>),
    /// `DOF_SECT_COMMENTS`.
    Comments(Vec<u8>),
    /// `DOF_SECT_SOURCE`.
    Source(Vec<u8>),
    /// `DOF_SECT_ECBDESC`.
    EcbDesc(EcbDesc),
    /// `DOF_SECT_PROBEDESC`.
    ProbeDesc(ProbeDesc),
    /// `DOF_SECT_ACTDESC`.
    ActDesc(Vec<ActDesc>),
    /// `DOF_SECT_DIFOHDR`.
    DifoHdr(DifoHdr),
    /// `DOF_SECT_DIF`: instruction words.
    Dif(Vec<u32>),
    /// `DOF_SECT_STRTAB`.
    StrTab(Vec<u8>),
    /// `DOF_SECT_VARTAB`.
    VarTab(Vec<DifVar>),
    /// `DOF_SECT_RELTAB`.
    RelTab(Vec<RelocDesc>),
    /// `DOF_SECT_TYPTAB`.
    TypTab(Vec<DifType>),
    /// `DOF_SECT_URELHDR`.
    URelHdr(RelocHdr),
    /// `DOF_SECT_KRELHDR`.
    KRelHdr(RelocHdr),
    /// `DOF_SECT_OPTDESC`.
    OptDesc(Vec<OptDesc>),
    /// `DOF_SECT_PROVIDER`.
    Provider(Provider),
    /// `DOF_SECT_PROBES`.
    Probes(Vec<Probe>),
    /// `DOF_SECT_PRARGS`.
    PrArgs(Vec<u8>),
    /// `DOF_SECT_PROFFS`.
    PrOffs(Vec<u32>),
    /// `DOF_SECT_INTTAB`.
    IntTab(Vec<u64>),
    /// `DOF_SECT_UTSNAME`.
    Utsname(Utsname),
    /// `DOF_SECT_XLTAB`.
    XlTab(Vec<XlRef>),
    /// `DOF_SECT_XLMEMBERS`.
    XlMembers(Vec<XlMember>),
    /// `DOF_SECT_XLIMPORT`.
    XlImport(Xlator),
    /// `DOF_SECT_XLEXPORT`.
    XlExport(Xlator),
    /// `DOF_SECT_PREXPORT`.
    PrExport(Vec<u32>),
    /// `DOF_SECT_PRENOFFS`.
    PrEnOffs(Vec<u32>),
    /// A section type this crate does not know: its type and raw bytes.
    Unknown(u32, Vec<u8>),
}

impl SectionData {
    /// The `DOF_SECT_*` type.
    pub fn sect_type(&self) -> u32 {
        match self {
            SectionData::None(_) => sect::NONE,
            SectionData::Comments(_) => sect::COMMENTS,
            SectionData::Source(_) => sect::SOURCE,
            SectionData::EcbDesc(_) => sect::ECBDESC,
            SectionData::ProbeDesc(_) => sect::PROBEDESC,
            SectionData::ActDesc(_) => sect::ACTDESC,
            SectionData::DifoHdr(_) => sect::DIFOHDR,
            SectionData::Dif(_) => sect::DIF,
            SectionData::StrTab(_) => sect::STRTAB,
            SectionData::VarTab(_) => sect::VARTAB,
            SectionData::RelTab(_) => sect::RELTAB,
            SectionData::TypTab(_) => sect::TYPTAB,
            SectionData::URelHdr(_) => sect::URELHDR,
            SectionData::KRelHdr(_) => sect::KRELHDR,
            SectionData::OptDesc(_) => sect::OPTDESC,
            SectionData::Provider(_) => sect::PROVIDER,
            SectionData::Probes(_) => sect::PROBES,
            SectionData::PrArgs(_) => sect::PRARGS,
            SectionData::PrOffs(_) => sect::PROFFS,
            SectionData::IntTab(_) => sect::INTTAB,
            SectionData::Utsname(_) => sect::UTSNAME,
            SectionData::XlTab(_) => sect::XLTAB,
            SectionData::XlMembers(_) => sect::XLMEMBERS,
            SectionData::XlImport(_) => sect::XLIMPORT,
            SectionData::XlExport(_) => sect::XLEXPORT,
            SectionData::PrExport(_) => sect::PREXPORT,
            SectionData::PrEnOffs(_) => sect::PRENOFFS,
            SectionData::Unknown(t, _) => *t,
        }
    }

    /// The alignment and entry size DTrace's compiler uses for this section type.
    pub fn default_align_entsize(&self) -> (u32, u32) {
        match self {
            SectionData::None(_) => (0, 0),
            SectionData::Comments(_) | SectionData::Source(_) | SectionData::StrTab(_) => (1, 0),
            SectionData::EcbDesc(_) => (8, 0),
            SectionData::ProbeDesc(_) => (4, 0),
            SectionData::ActDesc(_) => (8, size::ACTDESC as u32),
            SectionData::DifoHdr(_) => (4, 0),
            SectionData::Dif(_) => (4, 4),
            SectionData::VarTab(_) => (4, size::DIFV as u32),
            SectionData::RelTab(_) => (8, size::RELODESC as u32),
            SectionData::TypTab(_) => (4, size::DIFTYPE as u32),
            SectionData::URelHdr(_) | SectionData::KRelHdr(_) => (4, 0),
            SectionData::OptDesc(_) => (8, size::OPTDESC as u32),
            SectionData::Provider(_) => (4, 0),
            SectionData::Probes(_) => (8, size::PROBE as u32),
            SectionData::PrArgs(_) => (1, 1),
            SectionData::PrOffs(_) | SectionData::PrEnOffs(_) => (4, 4),
            SectionData::IntTab(_) => (8, 8),
            SectionData::Utsname(_) => (1, 0),
            SectionData::XlTab(_) => (4, size::XLREF as u32),
            SectionData::XlMembers(_) => (4, size::XLMEMBER as u32),
            SectionData::XlImport(_) | SectionData::XlExport(_) => (4, 0),
            SectionData::PrExport(_) => (4, 4),
            SectionData::Unknown(..) => (1, 0),
        }
    }
}

/// One section: its header fields (other than offset and size, which the writer computes) and data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// `dofs_align`.
    pub align: u32,
    /// `dofs_flags` (`DOF_SECF_LOAD`).
    pub flags: u32,
    /// `dofs_entsize`.
    pub entsize: u32,
    /// Contents.
    pub data: SectionData,
}

impl Section {
    /// A section with the conventional alignment, entry size, and loadable flag for its type.
    pub fn new(data: SectionData) -> Section {
        let (align, entsize) = data.default_align_entsize();
        let flags = if sect_loadable(data.sect_type()) {
            DOF_SECF_LOAD
        } else {
            0
        };
        Section {
            align,
            flags,
            entsize,
            data,
        }
    }

    /// Whether `DOF_SECF_LOAD` is set.
    pub fn is_loadable(&self) -> bool {
        self.flags & DOF_SECF_LOAD != 0
    }
}

/// A whole DOF object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DofFile {
    /// Identification.
    pub ident: DofIdent,
    /// `dofh_flags`.
    pub flags: u32,
    /// Sections, in index order (links are indexes into this list).
    pub sections: Vec<Section>,
}

impl DofFile {
    /// An empty object with the default identification (LP64, little-endian, DOF version 2, DIF 2).
    pub fn new() -> DofFile {
        DofFile::default()
    }

    /// Appends a section and returns its index.
    pub fn add(&mut self, s: Section) -> u32 {
        self.sections.push(s);
        self.sections.len() as u32 - 1
    }

    /// The section at `index`.
    pub fn section(&self, index: u32) -> Option<&Section> {
        self.sections.get(index as usize)
    }
}
