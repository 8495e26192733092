//! Compile errors as DTrace reports them: a message, the `D_*` error tag shown under `-x errtags`, and
//! where it happened (a line when compiling a file, a region such as "action list" for `-n` strings).

macro_rules! errtags {
    ($($name:ident,)*) => {
        /// DTrace's compiler error tags (`dt_errtag_t`); the tag name is what `-x errtags` prints.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[allow(non_camel_case_types)]
        pub enum ErrTag { $($name,)* }

        impl ErrTag {
            /// The tag's name as DTrace prints it, e.g. `D_OP_INCOMPAT`.
            pub fn name(self) -> &'static str {
                match self { $(ErrTag::$name => stringify!($name),)* }
            }

            /// The tag named `name` (`D_PROC_FUNC`), if DTrace has it.
            pub fn from_name(name: &str) -> Option<ErrTag> {
                match name { $(stringify!($name) => Some(ErrTag::$name),)* _ => None }
            }
        }
    };
}

errtags! {
    D_UNKNOWN, D_SYNTAX, D_EMPTY, D_TYPE_ERR, D_TYPE_MEMBER, D_CG_EXPR, D_CG_DYN, D_ID_OFLOW,
    D_PDESC_INVAL, D_PDESC_ZERO, D_PRED_SCALAR, D_FUNC_IDENT, D_FUNC_UNDEF, D_FUNC_IDKIND, D_OFFSETOF_TYPE,
    D_SIZEOF_TYPE, D_STRINGOF_TYPE, D_OP_IDENT, D_OP_INT, D_OP_SCALAR, D_OP_ARITH, D_OP_WRITE,
    D_OP_LVAL, D_OP_INCOMPAT, D_OP_VFPTR, D_OP_ARRFUN, D_OP_PTR, D_OP_SOU, D_OP_INCOMPLETE, D_OP_DYN,
    D_OP_ACT, D_AGG_REDEF, D_AGG_FUNC, D_AGG_NULL, D_AGG_MDIM, D_ARR_BADREF, D_ARR_BOUNDS, D_ARR_LOCAL, D_DIV_ZERO,
    D_DEREF_NONPTR, D_DEREF_VOID, D_ADDROF_LVAL, D_ADDROF_VAR, D_ADDROF_BITFIELD, D_SIZEOF_BITFIELD, D_OFFSETOF_BITFIELD, D_XLATE_REDECL, D_XLATE_NONE,
    D_XLATE_SOU, D_XLATE_MEMB, D_XLATE_NOCONV, D_XLATE_INCOMPAT, D_CAST_INVAL, D_PRAGERR, D_PRAGCTL_INVAL, D_PRAGMA_INVAL, D_PRAGMA_MALFORM,
    D_PRAGMA_OPTSET, D_PRAGMA_DEPEND, D_MACRO_UNDEF, D_MACRO_OFLOW, D_MACRO_UNUSED, D_INT_OFLOW,
    D_INT_DIGIT, D_STR_NL, D_CHR_NL, D_CHR_NULL, D_CHR_OFLOW, D_IDENT_BADREF, D_IDENT_UNDEF, D_SYM_NOTYPES,
    D_VAR_UNDEF, D_VAR_UNSUP, D_PROTO_LEN, D_PROTO_ARG, D_ARGS_IDX, D_ARGS_TYPE, D_KEY_TYPE, D_PRINTF_ARG_PROTO,
    D_PRINTF_ARG_TYPE, D_PRINTF_ARG_EXTRA, D_PRINTF_ARG_FMT, D_PRINTF_FMT_EMPTY, D_PRINTF_AGG_CONV, D_PRINTF_DYN_PROTO, D_PRINTF_DYN_TYPE,
    D_DECL_SIGNINT, D_DECL_LONGINT, D_DECL_CLASS, D_DECL_CHARATTR, D_DECL_VOIDATTR, D_DECL_PARMCLASS, D_DECL_PROTO_NAME, D_DECL_PROTO_TYPE, D_DECL_PROTO_VARARGS, D_DECL_COMBO, D_DECL_ARRSUB, D_DECL_ARRNULL, D_DECL_IDRED,
    D_DECL_TYPERED, D_DECL_ENCONST, D_DECL_ENOFLOW, D_DECL_USELESS, D_DECL_LOCASSC, D_DECL_VOIDOBJ,
    D_DECL_INCOMPLETE, D_DECL_BFCONST, D_DECL_BFTYPE, D_DECL_BFSIZE, D_COMM_COMM, D_COMM_DREC, D_SPEC_SPEC, D_SPEC_COMM, D_SPEC_DREC, D_AGG_COMM,
    D_AGG_SPEC, D_AGG_SCALAR, D_ACT_SPEC, D_EXIT_SPEC, D_DREC_COMM, D_PRINTA_PROTO, D_PRINTA_AGGARG, D_PRINTA_AGGKEY, D_PRINTA_AGGPROTO,
    D_TRACE_VOID, D_TRACE_DYN, D_PRINT_VOID, D_PRINT_DYN, D_PRINT_SIZE, D_FREOPEN_INVALID, D_ALLOCA_SIZE, D_ALLOCA_INCOMPAT, D_PRINT_AGG, D_TRACEMEM_ADDR, D_TRACEMEM_SIZE, D_TRACEMEM_ARGS, D_TRACEMEM_DYNSIZE, D_STACK_PROTO, D_STACK_SIZE,
    D_USTACK_FRAMES, D_USTACK_STRSIZE, D_USTACK_PROTO, D_LQUANT_BASETYPE, D_LQUANT_BASEVAL,
    D_LQUANT_LIMTYPE, D_LQUANT_LIMVAL, D_LQUANT_MISMATCH, D_LQUANT_STEPTYPE, D_LQUANT_STEPVAL,
    D_LQUANT_STEPLARGE, D_LQUANT_STEPSMALL, D_LQUANT_MATCHBASE, D_LQUANT_MATCHLIM, D_LQUANT_MATCHSTEP,
    D_LLQUANT_FACTORTYPE, D_LLQUANT_FACTORVAL, D_LLQUANT_LMAGTYPE, D_LLQUANT_LMAGVAL,
    D_LLQUANT_HMAGTYPE, D_LLQUANT_HMAGVAL, D_LLQUANT_STEPTYPE, D_LLQUANT_STEPVAL,
    D_LLQUANT_MATCHFACTOR, D_LLQUANT_MATCHLMAG, D_LLQUANT_MATCHHMAG, D_LLQUANT_MATCHSTEPS, D_CLEAR_PROTO,
    D_CLEAR_AGGARG, D_NORMALIZE_PROTO, D_NORMALIZE_SCALAR, D_NORMALIZE_AGGARG, D_TRUNC_PROTO,
    D_TRUNC_SCALAR, D_TRUNC_AGGARG, D_ACT_DESTRUCT, D_NOT_SUPPORTED, D_NOREG, D_REGS_IDX,
    D_PROV_BADNAME, D_PROV_PRDUP, D_PROV_PRARGLEN, D_PROV_PRXLATOR,
    D_PROC_OFF, D_PROC_ALIGN, D_PROC_NAME, D_PROC_GRAB, D_PROC_DYN, D_PROC_LIB, D_PROC_FUNC,
    D_PROC_CREATEFAIL, D_PROC_NODEV, D_PROC_BADPID, D_PROC_BADPROV, D_PROC_USDT,
}

/// A compile error: DTrace's tag and message, and where it happened to the extent DTrace reports it.
/// It displays as `dtrace_errmsg()` does for a file (`line N: message`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.file_message(false))]
pub struct CompileError {
    /// The error tag.
    pub tag: ErrTag,
    /// The message, without location.
    pub message: String,
    /// Source line (1-based), when known.
    pub line: Option<u32>,
    /// The region being compiled ("action list", "predicate"), when known.
    pub region: Option<&'static str>,
}

impl CompileError {
    /// An error with a tag and message at a line.
    pub fn new(tag: ErrTag, line: u32, message: impl Into<String>) -> CompileError {
        CompileError {
            tag,
            message: message.into(),
            line: if line == 0 { None } else { Some(line) },
            region: None,
        }
    }

    /// The message as `dtrace_errmsg()` yields it for a script read from a file:
    /// `[D_TAG] line N: message` (the tag only when `errtags` is set).
    pub fn file_message(&self, errtags: bool) -> String {
        let mut s = self.tag_prefix(errtags);
        if let Some(l) = self.line {
            s.push_str(&format!("line {l}: "));
        } else if let Some(r) = self.region {
            s.push_str(&format!("in {r}: "));
        }
        s.push_str(&self.message);
        s
    }

    /// The message for a program given as a string (`-n`, `-P`, ...): no line, but the region.
    pub fn string_message(&self, errtags: bool) -> String {
        let mut s = self.tag_prefix(errtags);
        if let Some(r) = self.region {
            s.push_str(&format!("in {r}: "));
        }
        s.push_str(&self.message);
        s
    }

    /// What `dtrace -s name` prints after `dtrace: `.
    pub fn render_script(&self, name: &str, errtags: bool) -> String {
        format!(
            "failed to compile script {name}: {}",
            self.file_message(errtags)
        )
    }

    /// What `dtrace -n spec` prints after `dtrace: `.
    pub fn render_specifier(&self, spec: &str, errtags: bool) -> String {
        format!(
            "invalid probe specifier {spec}: {}",
            self.string_message(errtags)
        )
    }

    fn tag_prefix(&self, errtags: bool) -> String {
        if errtags {
            format!("[{}] ", self.tag.name())
        } else {
            String::new()
        }
    }
}

/// Shorthand for building an error result.
pub fn err<T>(tag: ErrTag, line: u32, message: impl Into<String>) -> Result<T, CompileError> {
    Err(CompileError::new(tag, line, message))
}

/// Result alias of this crate.
pub type CResult<T> = Result<T, CompileError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_found_by_name() {
        assert_eq!(ErrTag::from_name("D_PROC_FUNC"), Some(ErrTag::D_PROC_FUNC));
        assert_eq!(
            ErrTag::from_name("D_PDESC_ZERO"),
            Some(ErrTag::D_PDESC_ZERO)
        );
        assert_eq!(ErrTag::from_name("D_NO_SUCH_TAG"), None);
        assert_eq!(ErrTag::D_PROC_BADPID.name(), "D_PROC_BADPID");
    }
}
