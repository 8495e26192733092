//! Numeric values of DOF (illumos/FreeBSD `sys/dtrace.h`): identification bytes, section types,
//! flags, relocation types, DIF type and variable codes, and the sizes of the on-disk structures.

/// `\177DOF`.
pub const DOF_MAG: [u8; 4] = [0x7f, b'D', b'O', b'F'];
/// Index of the data model byte in `dofh_ident`.
pub const DOF_ID_MODEL: usize = 4;
/// Index of the encoding byte.
pub const DOF_ID_ENCODING: usize = 5;
/// Index of the DOF version byte.
pub const DOF_ID_VERSION: usize = 6;
/// Index of the DIF version byte.
pub const DOF_ID_DIFVERS: usize = 7;
/// Index of the DIF integer register count.
pub const DOF_ID_DIFIREG: usize = 8;
/// Index of the DIF tuple register count.
pub const DOF_ID_DIFTREG: usize = 9;
/// First padding byte of the identification.
pub const DOF_ID_PAD: usize = 10;
/// Size of `dofh_ident`.
pub const DOF_ID_SIZE: usize = 16;

/// Data model: none.
pub const DOF_MODEL_NONE: u8 = 0;
/// Data model: ILP32.
pub const DOF_MODEL_ILP32: u8 = 1;
/// Data model: LP64.
pub const DOF_MODEL_LP64: u8 = 2;
/// Encoding: none.
pub const DOF_ENCODE_NONE: u8 = 0;
/// Encoding: little-endian.
pub const DOF_ENCODE_LSB: u8 = 1;
/// Encoding: big-endian.
pub const DOF_ENCODE_MSB: u8 = 2;

/// DOF version 1 (Solaris 10): `dof_provider_t` without `dofpv_prenoffs`.
pub const DOF_VERSION_1: u8 = 1;
/// DOF version 2: is-enabled probes (`dofpv_prenoffs`).
pub const DOF_VERSION_2: u8 = 2;
/// DOF version 3 (the version macOS requires; same structures as version 2).
pub const DOF_VERSION_3: u8 = 3;
/// The version we write by default.
pub const DOF_VERSION: u8 = DOF_VERSION_2;

/// DIF version 1.
pub const DIF_VERSION_1: u8 = 1;
/// DIF version 2 (the one the spec describes).
pub const DIF_VERSION_2: u8 = 2;
/// DIF integer registers.
pub const DIF_DIR_NREGS: u8 = 8;
/// DIF tuple registers.
pub const DIF_DTR_NREGS: u8 = 8;

/// `dofh_flags`: the mask of valid flags (none are defined).
pub const DOF_FL_VALID: u32 = 0;
/// `dofs_flags`: the section is loaded into the kernel.
pub const DOF_SECF_LOAD: u32 = 1;
/// "No section" in a `dof_secidx_t`.
pub const DOF_SECIDX_NONE: u32 = u32::MAX;

/// Section types (Table 6.1).
pub mod sect {
    /// Null section.
    pub const NONE: u32 = 0;
    /// Compiler comments.
    pub const COMMENTS: u32 = 1;
    /// D program source.
    pub const SOURCE: u32 = 2;
    /// `dof_ecbdesc_t`.
    pub const ECBDESC: u32 = 3;
    /// `dof_probedesc_t`.
    pub const PROBEDESC: u32 = 4;
    /// `dof_actdesc_t` array.
    pub const ACTDESC: u32 = 5;
    /// `dof_difohdr_t`.
    pub const DIFOHDR: u32 = 6;
    /// DIF instructions.
    pub const DIF: u32 = 7;
    /// String table.
    pub const STRTAB: u32 = 8;
    /// `dtrace_difv_t` array.
    pub const VARTAB: u32 = 9;
    /// `dof_relodesc_t` array.
    pub const RELTAB: u32 = 10;
    /// `dtrace_diftype_t` array.
    pub const TYPTAB: u32 = 11;
    /// `dof_relohdr_t`, user relocations.
    pub const URELHDR: u32 = 12;
    /// `dof_relohdr_t`, kernel relocations.
    pub const KRELHDR: u32 = 13;
    /// `dof_optdesc_t` array.
    pub const OPTDESC: u32 = 14;
    /// `dof_provider_t`.
    pub const PROVIDER: u32 = 15;
    /// `dof_probe_t` array.
    pub const PROBES: u32 = 16;
    /// `uint8_t` array: probe argument mappings.
    pub const PRARGS: u32 = 17;
    /// `uint32_t` array: probe offsets.
    pub const PROFFS: u32 = 18;
    /// `uint64_t` array: integer table.
    pub const INTTAB: u32 = 19;
    /// `struct utsname`.
    pub const UTSNAME: u32 = 20;
    /// `dof_xlref_t` array.
    pub const XLTAB: u32 = 21;
    /// `dof_xlmember_t` array.
    pub const XLMEMBERS: u32 = 22;
    /// `dof_xlator_t`, imported.
    pub const XLIMPORT: u32 = 23;
    /// `dof_xlator_t`, exported.
    pub const XLEXPORT: u32 = 24;
    /// `dof_secidx_t` array: exported objects.
    pub const PREXPORT: u32 = 25;
    /// `uint32_t` array: is-enabled offsets.
    pub const PRENOFFS: u32 = 26;
}

/// Name of a section type, as `DOF_SECT_*` without the prefix.
pub fn sect_name(t: u32) -> &'static str {
    const NAMES: [&str; 27] = [
        "NONE",
        "COMMENTS",
        "SOURCE",
        "ECBDESC",
        "PROBEDESC",
        "ACTDESC",
        "DIFOHDR",
        "DIF",
        "STRTAB",
        "VARTAB",
        "RELTAB",
        "TYPTAB",
        "URELHDR",
        "KRELHDR",
        "OPTDESC",
        "PROVIDER",
        "PROBES",
        "PRARGS",
        "PROFFS",
        "INTTAB",
        "UTSNAME",
        "XLTAB",
        "XLMEMBERS",
        "XLIMPORT",
        "XLEXPORT",
        "PREXPORT",
        "PRENOFFS",
    ];
    NAMES.get(t as usize).copied().unwrap_or("UNKNOWN")
}

/// Whether Table 6.1 marks sections of this type loadable.
pub fn sect_loadable(t: u32) -> bool {
    !matches!(
        t,
        sect::NONE | sect::COMMENTS | sect::SOURCE | sect::UTSNAME
    ) && t <= sect::PRENOFFS
}

/// Relocation: none.
pub const DOF_RELO_NONE: u32 = 0;
/// Relocation: set a 64-bit value (add the base address).
pub const DOF_RELO_SETX: u32 = 1;
/// Relocation: relative to the DOF itself (version 3).
pub const DOF_RELO_DOFREL: u32 = 2;

/// `dtrace_diftype_t.dtdt_kind`: a CTF type.
pub const DIF_TYPE_CTF: u8 = 0;
/// `dtrace_diftype_t.dtdt_kind`: a D string.
pub const DIF_TYPE_STRING: u8 = 1;
/// `dtdt_flags`: passed by reference.
pub const DIF_TF_BYREF: u8 = 0x1;
/// `dtdt_flags`: passed by user reference.
pub const DIF_TF_BYUREF: u8 = 0x2;

/// `dtdv_kind`: array.
pub const DIFV_KIND_ARRAY: u8 = 0;
/// `dtdv_kind`: scalar.
pub const DIFV_KIND_SCALAR: u8 = 1;
/// `dtdv_scope`: global.
pub const DIFV_SCOPE_GLOBAL: u8 = 0;
/// `dtdv_scope`: thread-local.
pub const DIFV_SCOPE_THREAD: u8 = 1;
/// `dtdv_scope`: clause-local.
pub const DIFV_SCOPE_LOCAL: u8 = 2;
/// `dtdv_flags`: referenced.
pub const DIFV_F_REF: u16 = 0x1;
/// `dtdv_flags`: modified.
pub const DIFV_F_MOD: u16 = 0x2;

/// Sizes of the on-disk structures.
pub mod size {
    /// `dof_hdr_t`.
    pub const HDR: usize = 64;
    /// `dof_sec_t`.
    pub const SEC: usize = 32;
    /// `dof_ecbdesc_t`.
    pub const ECBDESC: usize = 24;
    /// `dof_probedesc_t`.
    pub const PROBEDESC: usize = 24;
    /// `dof_actdesc_t`.
    pub const ACTDESC: usize = 32;
    /// `dtrace_diftype_t`.
    pub const DIFTYPE: usize = 8;
    /// `dof_difohdr_t` with its one declared link.
    pub const DIFOHDR: usize = 12;
    /// `dtrace_difv_t`.
    pub const DIFV: usize = 20;
    /// `dof_relohdr_t`.
    pub const RELOHDR: usize = 12;
    /// `dof_relodesc_t`.
    pub const RELODESC: usize = 24;
    /// `dof_optdesc_t`.
    pub const OPTDESC: usize = 16;
    /// `dof_provider_t` (version 2 and later).
    pub const PROVIDER: usize = 44;
    /// `dof_provider_t` of version 1 (no `dofpv_prenoffs`).
    pub const PROVIDER_V1: usize = 40;
    /// `dof_probe_t`.
    pub const PROBE: usize = 48;
    /// `dof_xlator_t`.
    pub const XLATOR: usize = 24;
    /// `dof_xlmember_t`.
    pub const XLMEMBER: usize = 16;
    /// `dof_xlref_t`.
    pub const XLREF: usize = 12;
    /// One field of the Solaris `struct utsname` (`_SYS_NMLN`).
    pub const UTS_FIELD: usize = 257;
    /// `struct utsname`: five fields.
    pub const UTSNAME: usize = 5 * UTS_FIELD;
}

/// Packs a stability attribute triple (name, data, class stability) as `DOF_ATTR` does.
pub fn dof_attr(name: u8, data: u8, class: u8) -> u32 {
    (u32::from(name) << 24) | (u32::from(data) << 16) | (u32::from(class) << 8)
}
