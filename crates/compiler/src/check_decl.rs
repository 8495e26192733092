//! Declarations: type names to types (with struct/union layout and enum values), typedefs, variable
//! declarations in the three scopes, inline definitions, translators (recorded) and `#pragma D`
//! directives (options, and the accepted-but-inert `depends_on`, `attributes`, `binding`).

use crate::ast::{
    BaseType, DeclSpec, Declarator, Derived, Expr, Item, SouKind, StorageClass, TypeName, VarScope,
};
use crate::check::{Checker, Inline};
use crate::error::{err, CResult, ErrTag};
use crate::tree::TExpr;
use crate::types::{Member, TypeId, TypeKind};

impl<'o> Checker<'o> {
    /// Resolves a type name.
    pub fn resolve_type_name(&mut self, tn: &TypeName) -> CResult<TypeId> {
        let base = self.base_type(&tn.spec)?;
        let (t, keys) = self.apply_declarator(base, &tn.decl, tn.spec.line, false)?;
        if keys.is_some() {
            return err(
                ErrTag::D_DECL_ARRNULL,
                tn.spec.line,
                "associative array signature is not permitted in a type name",
            );
        }
        Ok(t)
    }

    fn base_type(&mut self, spec: &DeclSpec) -> CResult<TypeId> {
        let line = spec.line;
        match &spec.base {
            BaseType::Named(n) => match self.types.lookup(n) {
                Some(t) => Ok(t),
                None => err(
                    ErrTag::D_TYPE_ERR,
                    line,
                    format!("failed to resolve type {n}: Unknown type name"),
                ),
            },
            BaseType::Sou(kind, name, members) => {
                let kw = if *kind == SouKind::Struct {
                    "struct"
                } else {
                    "union"
                };
                // `struct D`s` names the type in DTrace's container of D definitions: the types
                // this program declares
                let full = name.as_ref().map(|n| {
                    let n = n.strip_prefix("D`").unwrap_or(n);
                    format!("{kw} {n}")
                });
                let existing = full.as_ref().and_then(|f| self.types.lookup(f));
                let Some(members) = members else {
                    if let Some(t) = existing {
                        return Ok(t);
                    }
                    if let Some(f) = &full {
                        self.declared_types.push(f.clone());
                    }
                    let fname = full.unwrap_or_else(|| format!("{kw} <anon>"));
                    let kind = TypeKind::Sou {
                        kind: *kind,
                        members: None,
                        size: 0,
                        align: 1,
                    };
                    return Ok(self.types.add_named(&fname, kind));
                };
                // A definition in D shadows a type of the same name from the kernel's types (DTrace
                // keeps D definitions in a container of their own, searched first); only a second
                // definition in D is a redeclaration.
                let existing = existing.filter(|_| {
                    full.as_ref()
                        .is_some_and(|f| self.declared_types.contains(f))
                });
                if let Some(f) = &full {
                    self.declared_types.push(f.clone());
                }
                if let Some(t) = existing {
                    if matches!(
                        self.types.kind(t),
                        TypeKind::Sou {
                            members: Some(_),
                            ..
                        }
                    ) {
                        return err(
                            ErrTag::D_DECL_TYPERED,
                            line,
                            format!("type redeclared: {}", full.unwrap_or_default()),
                        );
                    }
                }
                let id = match existing {
                    Some(t) => t,
                    None => {
                        let fname = full.clone().unwrap_or_else(|| format!("{kw} <anon>"));
                        let k = TypeKind::Sou {
                            kind: *kind,
                            members: None,
                            size: 0,
                            align: 1,
                        };
                        if full.is_some() {
                            self.types.add_named(&fname, k)
                        } else {
                            self.types.add(fname, k)
                        }
                    }
                };
                let mut out: Vec<Member> = Vec::new();
                // `end`: where the last member ends, which is a struct's size in libctf's layout
                // (no tail padding: `struct { int a; char b; }` is 5 bytes to DTrace).
                let (mut off, mut size, mut align, mut end) = (0u64, 0u64, 1u64, 0u64);
                for m in members {
                    let mb = self.base_type(&m.spec)?;
                    let (mt, keys) = self.apply_declarator(mb, &m.decl, m.line, false)?;
                    if keys.is_some() {
                        return err(
                            ErrTag::D_DECL_ARRNULL,
                            m.line,
                            "associative arrays may not be struct members",
                        );
                    }
                    if let Some(bits) = &m.bits {
                        let width = self.bitfield_width(mt, bits, m)?;
                        if width == 0 {
                            continue; // `int : 0;` ends packing, which DTrace never does anyway
                        }
                        // DTrace's layout (libctf's): each bit-field starts on a byte boundary, in the
                        // smallest power-of-two number of bytes holding it, aligned to that size
                        let msize = (width as u64).div_ceil(8).next_power_of_two();
                        align = align.max(msize);
                        let o = if *kind == SouKind::Struct {
                            let o = off.div_ceil(msize) * msize;
                            off = o + (width as u64).div_ceil(8);
                            end = o + msize;
                            o
                        } else {
                            size = size.max(msize);
                            0
                        };
                        let Some(mname) = m.decl.name.clone() else {
                            continue;
                        };
                        if out.iter().any(|x| x.name == mname) {
                            return err(
                                ErrTag::D_DECL_IDRED,
                                m.line,
                                format!("member redeclared: {mname}"),
                            );
                        }
                        out.push(Member {
                            name: mname,
                            ty: mt,
                            offset: o as u32,
                            bits: Some(crate::types::BitField {
                                shift: 0,
                                width: width as u8,
                                load: msize as u8,
                            }),
                        });
                        continue;
                    }
                    let Some(mname) = m.decl.name.clone() else {
                        return err(ErrTag::D_DECL_USELESS, m.line, "member name missing");
                    };
                    if out.iter().any(|x| x.name == mname) {
                        return err(
                            ErrTag::D_DECL_IDRED,
                            m.line,
                            format!("member redeclared: {mname}"),
                        );
                    }
                    let msize = self.types.size(mt);
                    // void and functions have no size, and DTrace names them void members
                    if self.types.is_void(mt)
                        || matches!(self.types.rkind(mt), TypeKind::Function(..))
                    {
                        return err(
                            ErrTag::D_DECL_VOIDOBJ,
                            m.line,
                            format!("cannot have void member: {mname}"),
                        );
                    }
                    if msize == 0 {
                        return err(
                            ErrTag::D_DECL_INCOMPLETE,
                            m.line,
                            format!("incomplete struct/union/enum {}: {mname}", self.tname(mt)),
                        );
                    }
                    let malign = self.types.align(mt);
                    align = align.max(malign);
                    let o = if *kind == SouKind::Struct {
                        let o = off.div_ceil(malign) * malign;
                        off = o + msize;
                        end = off;
                        o
                    } else {
                        size = size.max(msize);
                        0
                    };
                    out.push(Member {
                        name: mname,
                        ty: mt,
                        offset: o as u32,
                        bits: None,
                    });
                }
                let total = if *kind == SouKind::Struct { end } else { size };
                self.types.set_kind(
                    id,
                    TypeKind::Sou {
                        kind: *kind,
                        members: Some(out),
                        size: total as u32,
                        align: align as u32,
                    },
                );
                Ok(id)
            }
            BaseType::Enum(name, values) => {
                let full = name.as_ref().map(|n| format!("enum {n}"));
                let Some(values) = values else {
                    if let Some(t) = full.as_ref().and_then(|f| self.types.lookup(f)) {
                        return Ok(t);
                    }
                    let f = full.unwrap_or_else(|| "enum <anon>".into());
                    return Ok(self
                        .types
                        .add_named(&f, TypeKind::Enum { values: Vec::new() }));
                };
                let f = full.clone().unwrap_or_else(|| "enum <anon>".into());
                let id = if full.is_some() {
                    self.types
                        .add_named(&f, TypeKind::Enum { values: Vec::new() })
                } else {
                    self.types.add(f, TypeKind::Enum { values: Vec::new() })
                };
                let mut next: i64 = 0;
                let mut vals = Vec::new();
                for (n, v, l) in values {
                    if let Some(e) = v {
                        let c = self.cook(e)?;
                        match c.as_const() {
                            Some(x) => {
                                // the constant's value as its type gives it
                                let bits = 8 * self.types.size(c.ty).clamp(1, 8) as u32;
                                next = if bits == 64 {
                                    x as i64
                                } else if self.types.is_signed(c.ty) {
                                    ((x << (64 - bits)) as i64) >> (64 - bits)
                                } else {
                                    (x & ((1u64 << bits) - 1)) as i64
                                };
                            }
                            None => {
                                return err(
                                    ErrTag::D_DECL_ENCONST,
                                    *l,
                                    format!("enumerator '{n}' must be assigned to an integral constant expression"),
                                )
                            }
                        }
                    }
                    if next > i32::MAX as i64 || next < i32::MIN as i64 {
                        // DTrace names INT_MAX for values below INT_MIN as well
                        return err(
                            ErrTag::D_DECL_ENOFLOW,
                            *l,
                            format!("enumerator '{n}' value overflows INT_MAX (2147483647)"),
                        );
                    }
                    if vals.iter().any(|(v, _)| v == n) {
                        // the same name twice in one enum: the type container refuses the member
                        return err(
                            ErrTag::D_UNKNOWN,
                            *l,
                            format!("failed to define enumerator '{n}': Duplicate member or variable name"),
                        );
                    }
                    if self.enums.contains_key(n) || self.globals.vars.contains_key(n) {
                        return err(
                            ErrTag::D_DECL_IDRED,
                            *l,
                            format!("identifier redeclared: {n}"),
                        );
                    }
                    self.enums.insert(n.clone(), (next, id));
                    vals.push((n.clone(), next));
                    next = next.wrapping_add(1);
                }
                self.types.set_kind(id, TypeKind::Enum { values: vals });
                Ok(id)
            }
        }
    }

    /// Applies a declarator to a base type; returns the type and, for associative arrays, the key
    /// signature.
    fn apply_declarator(
        &mut self,
        base: TypeId,
        d: &Declarator,
        line: u32,
        unsized_ok: bool,
    ) -> CResult<(TypeId, Option<Vec<TypeId>>)> {
        let mut t = base;
        let mut keys = None;
        let n = d.derived.len();
        for (i, dv) in d.derived.iter().enumerate() {
            match dv {
                Derived::Pointer => t = self.types.pointer_to(t),
                Derived::Array(None) if unsized_ok => t = self.types.array_of(t, 0),
                Derived::Array(None) => {
                    return err(
                        ErrTag::D_DECL_ARRNULL,
                        line,
                        format!(
                            "array declaration requires array dimension or tuple signature: {}",
                            d.name.as_deref().unwrap_or("")
                        ),
                    )
                }
                Derived::Array(Some(e)) => {
                    let c = self.cook(e)?;
                    match c.as_const() {
                        Some(v) if self.types.is_integer(c.ty) && (v as i64) > 0 && v <= i32::MAX as u64 => {
                            t = self.types.array_of(t, v as u32)
                        }
                        _ => {
                            return err(
                                ErrTag::D_DECL_ARRSUB,
                                line,
                                "positive integral constant expression or tuple signature expected as array declaration subscript",
                            )
                        }
                    }
                }
                Derived::Assoc(sig) => {
                    if i + 1 != n {
                        return err(
                            ErrTag::D_DECL_ARRNULL,
                            line,
                            "associative arrays may only be declared as variables",
                        );
                    }
                    let mut k = Vec::new();
                    for (j, tn) in sig.iter().enumerate() {
                        param_class(tn, line)?;
                        let kt = self.resolve_type_name(tn)?;
                        if self.types.is_void(kt) {
                            return err(
                                ErrTag::D_DECL_PROTO_TYPE,
                                line,
                                format!(
                                    "array prototype may not use parameter of type void: {}, parameter #{}",
                                    tn.decl.name.as_deref().unwrap_or("(anonymous)"),
                                    j + 1
                                ),
                            );
                        }
                        k.push(kt);
                    }
                    keys = Some(k);
                }
                Derived::Function(params) => {
                    let mut ps = Vec::new();
                    for p in params {
                        param_class(p, line)?;
                        let pt = self.resolve_type_name(p)?;
                        if let (true, Some(name)) = (self.types.is_void(pt), &p.decl.name) {
                            return err(
                                ErrTag::D_DECL_PROTO_NAME,
                                line,
                                format!("void parameter may not have a name: {name}"),
                            );
                        }
                        ps.push(pt);
                    }
                    let name = format!("{} (*)()", self.tname(t));
                    t = self.types.add(name, TypeKind::Function(t, ps));
                }
            }
        }
        Ok((t, keys))
    }

    /// The width of bit-field member `m` of type `ty`, checked as DTrace checks it.
    fn bitfield_width(
        &mut self,
        ty: TypeId,
        bits: &crate::ast::Expr,
        m: &crate::ast::MemberDecl,
    ) -> CResult<u32> {
        let idname = m.decl.name.clone().unwrap_or_else(|| "(anon)".into());
        let v = self.cook(bits)?;
        let w = match v.as_const() {
            Some(0) if m.decl.name.is_none() => return Ok(0),
            Some(w) if self.types.is_integer(v.ty) && w > 0 && (w as i64) > 0 => w,
            _ => {
                return err(
                    ErrTag::D_DECL_BFCONST,
                    m.line,
                    "positive integral constant expression expected as bit-field size",
                )
            }
        };
        let base_bits = match self.types.rkind(ty) {
            TypeKind::Int { size, .. } => *size as u64 * 8,
            _ => {
                return err(
                    ErrTag::D_DECL_BFTYPE,
                    m.line,
                    format!("invalid type for bit-field: {idname}"),
                )
            }
        };
        if w > base_bits {
            return err(
                ErrTag::D_DECL_BFSIZE,
                m.line,
                format!("bit-field too big for type: {idname}"),
            );
        }
        Ok(w as u32)
    }

    /// Declares an item of the D library: as [`Self::declare`], but a translator is kept even
    /// when some member's conversion does not cook against the running kernel's types (using
    /// that member fails then, the others work).
    pub fn declare_library(&mut self, item: &Item) -> CResult<()> {
        match item {
            Item::Translator { .. } => self.declare_translator(item, false),
            _ => self.declare(item),
        }
    }

    /// Processes a top-level declaration item (not clauses or pragmas).
    pub fn declare(&mut self, item: &Item) -> CResult<()> {
        match item {
            Item::Decl(spec, decls) => self.declare_vars(spec, decls),
            Item::Inline(tn, e, line) => self.declare_inline(tn, e, *line),
            Item::Translator { .. } => self.declare_translator(item, true),
            Item::Pragma(words, line) => self.pragma(words, *line),
            Item::Provider(d) => self.cook_provider(d).map(|_| ()),
            Item::Clause(_) => Ok(()),
        }
    }

    /// A translator definition; with `cook_members`, each member's conversion is cooked now, as
    /// DTrace does where a program defines one.
    fn declare_translator(&mut self, item: &Item, cook_members: bool) -> CResult<()> {
        match item {
            Item::Translator {
                out,
                input,
                param,
                members,
                line,
            } => {
                let o = self.resolve_type_name(out)?;
                let i = self.resolve_type_name(input)?;
                if matches!(self.types.rkind(o), TypeKind::Sou { members: None, .. }) {
                    return err(
                        ErrTag::D_XLATE_SOU,
                        *line,
                        format!("incomplete struct/union/enum {}", self.tname(o)),
                    );
                }
                if !matches!(self.types.rkind(o), TypeKind::Sou { .. }) {
                    return err(
                        ErrTag::D_XLATE_SOU,
                        *line,
                        "translator output type must be a struct or union",
                    );
                }
                if self
                    .translators
                    .iter()
                    .any(|x| self.types.compat(x.input, i) && self.types.compat(x.output, o))
                {
                    return err(
                        ErrTag::D_XLATE_REDECL,
                        *line,
                        format!(
                            "translator from {} to {} has already been declared",
                            self.tname(i),
                            self.tname(o)
                        ),
                    );
                }
                for m in members {
                    if self.types.member(o, &m.name).is_none() {
                        return err(
                            ErrTag::D_XLATE_MEMB,
                            *line,
                            format!(
                                "translator member {} is not a member of {}",
                                m.name,
                                self.tname(o)
                            ),
                        );
                    }
                }
                self.translators.push(crate::check::Xlator {
                    input: i,
                    output: o,
                    param: param.clone(),
                    members: members.clone(),
                    library: !cook_members,
                });
                // DTrace cooks each member's conversion where the translator is defined: an
                // input member that does not exist or a type that does not fit is reported here,
                // whether or not the program ever translates
                let idx = self.translators.len() - 1;
                for m in members.iter().filter(|_| cook_members) {
                    let input = TExpr::int(0, i, m.line);
                    if let Err(mut e) = self.xlate_member_value(idx, input, &m.name, m.line) {
                        self.translators.pop();
                        // a conversion that does not fit is found by the translator's own check,
                        // which reports where the translator ends (an error inside the member's
                        // expression keeps the member's line)
                        if e.tag == ErrTag::D_XLATE_INCOMPAT {
                            e.line = Some(*line);
                        }
                        return Err(e);
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Whether `name` is a D function (subroutine, action or aggregating function) in the program's
    /// D version (`#pragma D option version`; the latest when not set).
    fn is_d_function(&self, name: &str) -> bool {
        let function = crate::idents::subr_proto(name).is_some()
            || crate::actions::action_func(name).is_some()
            || crate::actions::agg_func(name).is_some();
        let version = self
            .options
            .iter()
            .rev()
            .find(|(n, _)| n == "version")
            .and_then(|(_, v)| v.as_deref())
            .and_then(crate::idents::parse_version);
        function && version.is_none_or(|v| crate::idents::function_version(name) <= v)
    }

    fn declare_vars(&mut self, spec: &DeclSpec, decls: &[(Declarator, u32)]) -> CResult<()> {
        if decls.is_empty() && matches!(spec.base, BaseType::Named(_)) {
            return err(ErrTag::D_DECL_USELESS, spec.line, "useless declaration");
        }
        let base = self.base_type(spec)?;
        for (d, line) in decls {
            // an `extern` array may leave its size to the symbol it declares
            let unsized_ok = spec.class == Some(StorageClass::Extern);
            let (t, keys) = self.apply_declarator(base, d, *line, unsized_ok)?;
            let Some(name) = d.name.clone() else { continue };
            match spec.class {
                Some(StorageClass::Typedef) => {
                    if let Some(old) = self.types.lookup(&name) {
                        if matches!(self.types.kind(old), TypeKind::Typedef(x) if self.types.compat(*x, t))
                        {
                            continue;
                        }
                        // Only a name D itself declared is redeclared; a kernel type of that name
                        // is shadowed, as in DTrace.
                        if self.declared_types.contains(&name) || !self.types.is_imported(old) {
                            // DTrace for Linux: a typedef name given another type
                            if matches!(self.types.kind(old), TypeKind::Typedef(_)) {
                                return err(
                                    ErrTag::D_DECL_IDRED,
                                    *line,
                                    format!("typedef redeclared: {name}"),
                                );
                            }
                            return err(
                                ErrTag::D_DECL_TYPERED,
                                *line,
                                format!("type redeclared: {name}"),
                            );
                        }
                    }
                    self.types.add_named(&name, TypeKind::Typedef(t));
                    self.declared_types.push(name);
                }
                Some(StorageClass::Extern) => {
                    // kernel symbol declarations: resolved through symbol tables, not variables
                }
                Some(StorageClass::Static)
                | Some(StorageClass::Register)
                | Some(StorageClass::Auto) => {
                    return err(
                        ErrTag::D_DECL_COMBO,
                        *line,
                        "specified storage class not appropriate in D",
                    )
                }
                _ => {
                    let scope = match spec.class {
                        Some(StorageClass::SelfVar) => VarScope::Thread,
                        Some(StorageClass::ThisVar) => VarScope::Local,
                        _ => VarScope::Global,
                    };
                    if self.types.is_void(t) {
                        return err(
                            ErrTag::D_DECL_VOIDOBJ,
                            *line,
                            format!("cannot have void object: {name}"),
                        );
                    }
                    if scope == VarScope::Local && keys.is_some() {
                        return err(
                            ErrTag::D_DECL_LOCASSC,
                            *line,
                            format!(
                                "associative arrays may not be declared as local variables: {name}"
                            ),
                        );
                    }
                    if matches!(self.types.rkind(t), TypeKind::Sou { members: None, .. }) {
                        return err(
                            ErrTag::D_DECL_INCOMPLETE,
                            *line,
                            format!("incomplete struct/union/enum {}: {name}", self.tname(t)),
                        );
                    }
                    let d_function = self.is_d_function(&name);
                    let table = match scope {
                        VarScope::Global => &mut self.globals,
                        VarScope::Thread => &mut self.tls,
                        VarScope::Local => &mut self.locals,
                    };
                    if let Some(old) = table.vars.get(&name) {
                        if old.ty == Some(t) && old.keys == keys {
                            continue;
                        }
                        return err(
                            ErrTag::D_DECL_IDRED,
                            *line,
                            format!("identifier redeclared: {name}"),
                        );
                    }
                    if scope == VarScope::Global
                        && (self.inlines.contains_key(&name)
                            || crate::idents::builtin_var(&name).is_some()
                            || d_function)
                    {
                        return err(
                            ErrTag::D_DECL_IDRED,
                            *line,
                            format!("identifier redeclared: {name}"),
                        );
                    }
                    let array = keys.is_some();
                    let mut v = table.create(&name, array, *line, "global")?;
                    v.ty = Some(t);
                    v.keys = keys;
                    table.vars.insert(name, v);
                }
            }
        }
        Ok(())
    }

    fn declare_inline(&mut self, tn: &TypeName, e: &Expr, line: u32) -> CResult<()> {
        let base = self.base_type(&tn.spec)?;
        let (t, keys) = self.apply_declarator(base, &tn.decl, line, false)?;
        let Some(name) = tn.decl.name.clone() else {
            return err(
                ErrTag::D_DECL_USELESS,
                line,
                "inline declaration requires a name",
            );
        };
        // the previous identifier's kind as DTrace's dt_idkind_name() names it, then "inline"
        // when it is one
        let previous = if self.inlines.contains_key(&name) {
            Some("scalar inline")
        } else if self.inline_arrays.contains_key(&name) {
            Some("array inline")
        } else if let Some(v) = self.globals.vars.get(&name) {
            Some(if v.array { "array " } else { "scalar " })
        } else if let Some(b) = crate::idents::builtin_var(&name) {
            Some(if b.array { "array " } else { "scalar " })
        } else if crate::idents::subr_proto(&name).is_some() {
            Some("function ")
        } else if crate::actions::agg_func(&name).is_some() {
            Some("aggregating function ")
        } else if crate::check_expr::is_action_name(&name) {
            Some("tracing function ")
        } else {
            None
        };
        if let Some(previous) = previous {
            return err(
                ErrTag::D_DECL_IDRED,
                line,
                format!("identifier redefined: {name}\n\t current: inline definition\n\tprevious: {previous}"),
            );
        }
        if self.types.is_void(t) {
            return err(
                ErrTag::D_DECL_VOIDOBJ,
                line,
                format!("cannot declare void inline: {name}"),
            );
        }
        if let Some(keys) = keys {
            let names: Vec<Option<String>> = match tn.decl.derived.last() {
                Some(crate::ast::Derived::Assoc(sig)) => {
                    sig.iter().map(|p| p.decl.name.clone()).collect()
                }
                _ => Vec::new(),
            };
            let mut params = Vec::new();
            for (i, (n, t)) in names.into_iter().zip(keys).enumerate() {
                let Some(n) = n else {
                    return err(
                        ErrTag::D_DECL_PROTO_NAME,
                        line,
                        format!(
                            "parameter declaration requires a name: parameter #{}",
                            i + 1
                        ),
                    );
                };
                params.push((n, t));
            }
            self.inline_arrays.insert(
                name,
                crate::check::InlineArray {
                    ty: t,
                    params,
                    body: e.clone(),
                },
            );
            return Ok(());
        }
        // a translation stays unexpanded so that `curpsinfo->pr_pid` converts one member
        let v = self.cook_any(e)?;
        if !self.argcompat(t, &v) {
            return err(
                ErrTag::D_OP_INCOMPAT,
                line,
                format!(
                    "inline {name} definition uses incompatible types: \"{}\" = \"{}\"",
                    self.tname(t),
                    self.tname(v.ty)
                ),
            );
        }
        let v = self.convert(v, t);
        let (nodes, depth) = crate::tree::stats(&v);
        if nodes > 4096 || depth > 64 {
            return err(
                ErrTag::D_NOT_SUPPORTED,
                line,
                format!("not yet supported: inline {name} expands to an expression too large to compile"),
            );
        }
        self.inlines.insert(name, Inline { ty: t, expr: v });
        Ok(())
    }

    fn pragma(&mut self, words: &[String], line: u32) -> CResult<()> {
        match words.first().map(String::as_str) {
            Some("D") => {}
            Some("ident") | Some("once") | None => return Ok(()),
            Some(_) => return Ok(()), // other pragmas are ignored, as DTrace does
        }
        match words.get(1).map(String::as_str) {
            Some("option") => {
                if words.len() < 3 {
                    return err(ErrTag::D_PRAGMA_MALFORM, line, "malformed #pragma D option");
                }
                // one option per #pragma
                if words.len() > 3 {
                    return err(
                        ErrTag::D_PRAGMA_MALFORM,
                        line,
                        "superfluous arguments specified for #pragma option",
                    );
                }
                for w in &words[2..] {
                    let (name, value) = match w.split_once('=') {
                        Some((n, v)) => (n.to_string(), Some(v.to_string())),
                        None => (w.clone(), None),
                    };
                    if dtrace_dif::optval::option_kind(&name).is_none() {
                        return err(
                            ErrTag::D_PRAGMA_OPTSET,
                            line,
                            format!("failed to set option '{name}': Invalid option name"),
                        );
                    }
                    if dtrace_dif::optval::NOT_FROM_D.contains(&name.as_str()) {
                        let to = value
                            .as_deref()
                            .map(|v| format!(" to '{v}'"))
                            .unwrap_or_default();
                        return err(
                            ErrTag::D_PRAGMA_OPTSET,
                            line,
                            format!("failed to set option '{name}'{to}: Option cannot be used from within a D program"),
                        );
                    }
                    let invalid = || {
                        err(
                            ErrTag::D_PRAGMA_OPTSET,
                            line,
                            format!(
                                "failed to set option '{name}' to '{}': Invalid value for specified option",
                                value.as_deref().unwrap_or("")
                            ),
                        )
                    };
                    // sizes (with k/m/g/t suffixes) and counts: a value that is not one is
                    // refused here, where DTrace refuses it
                    if matches!(
                        dtrace_dif::optval::option_kind(&name),
                        Some((dtrace_dif::optval::OptKind::Size, _))
                    ) && value
                        .as_deref()
                        .and_then(dtrace_dif::optval::parse_size)
                        .is_none()
                    {
                        return invalid();
                    }
                    let count = value
                        .as_deref()
                        .and_then(dtrace_dif::optval::parse_c_unsigned)
                        .and_then(|v| u32::try_from(v).ok());
                    if COUNT_OPTIONS.contains(&name.as_str()) && count.is_none() {
                        return invalid();
                    }
                    // The stack actions that follow take their default sizes from these.
                    let d = &mut self.stack_defaults;
                    let slot = match name.as_str() {
                        "stackframes" => Some(&mut d.stackframes),
                        "ustackframes" => Some(&mut d.ustackframes),
                        "jstackframes" => Some(&mut d.jstackframes),
                        "jstackstrsize" => Some(&mut d.jstackstrsize),
                        _ => None,
                    };
                    if let (Some(slot), Some(n)) = (slot, count) {
                        *slot = n;
                    }
                    if name == "scratchsize" {
                        // as the framework keeps it: rounded up to 8 bytes
                        match value.as_deref().and_then(dtrace_dif::optval::parse_size) {
                            Some(v) if v > 0 => self.scratchsize = v.div_ceil(8) * 8,
                            _ => return invalid(),
                        }
                    }
                    if name == "strsize" {
                        match value.as_deref().and_then(dtrace_dif::optval::parse_size) {
                            Some(v) if v > 0 && v <= u32::MAX as u64 => {
                                self.strsize = v as u32;
                                self.types.strsize = v as u32;
                            }
                            _ => return invalid(),
                        }
                    }
                    self.options.push((name, value));
                }
                Ok(())
            }
            Some("depends_on") | Some("attributes") | Some("binding") | Some("error") => {
                if words.get(1).map(String::as_str) == Some("error") {
                    // each token of the message followed by a space, strings without quotes
                    let text: String = words[2..]
                        .iter()
                        .map(|w| format!("{} ", w.trim_matches('"')))
                        .collect();
                    return err(ErrTag::D_PRAGERR, line, format!("#error: {text}"));
                }
                if words[1] == "attributes" && words.get(3).map(String::as_str) == Some("provider")
                {
                    return self.provider_attributes(words, line);
                }
                if words[1] == "attributes" {
                    if words.len() != 4 {
                        return err(
                            ErrTag::D_PRAGMA_MALFORM,
                            line,
                            "malformed #pragma attributes <attributes> <ident>",
                        );
                    }
                    if !valid_attributes(&words[2]) {
                        return err(
                            ErrTag::D_PRAGMA_INVAL,
                            line,
                            "invalid attributes specified by #pragma attributes",
                        );
                    }
                }
                if words[1] == "depends_on" && words.get(2).map(String::as_str) == Some("library") {
                    return err(
                        ErrTag::D_PRAGMA_DEPEND,
                        line,
                        "main program may not explicitly depend on a library",
                    );
                }
                if words.len() < 3 {
                    return err(
                        ErrTag::D_PRAGMA_MALFORM,
                        line,
                        format!("malformed #pragma D {}", words[1]),
                    );
                }
                Ok(())
            }
            Some(other) => err(
                ErrTag::D_PRAGMA_INVAL,
                line,
                format!("invalid control directive: #pragma D {other}"),
            ),
            None => err(ErrTag::D_PRAGMA_MALFORM, line, "malformed #pragma D"),
        }
    }
}

/// Options whose value is a count.
const COUNT_OPTIONS: &[&str] = &[
    "nspec",
    "cpu",
    "stackframes",
    "ustackframes",
    "jstackframes",
    "jstackstrsize",
    "maxframes",
];

/// Whether `s` is an attribute triple `name/data/class` (`Stable/Stable/Common`).
const STABILITY: &[&str] = &[
    "Internal", "Private", "Obsolete", "External", "Unstable", "Evolving", "Stable", "Standard",
];
const CLASS: &[&str] = &["Unknown", "CPU", "Platform", "Group", "ISA", "Common"];

pub(crate) fn valid_attributes(s: &str) -> bool {
    attribute_numbers(s).is_some()
}

/// `Name/Data/Class` as DTrace's numbers (`dtrace_stability_t`, `dtrace_class_t`).
fn attribute_numbers(s: &str) -> Option<[u8; 3]> {
    let p: Vec<&str> = s.split('/').collect();
    let [n, d, c] = p.as_slice() else {
        return None;
    };
    let at = |list: &[&str], w: &str| list.iter().position(|x| x == &w).map(|i| i as u8);
    Some([at(STABILITY, n)?, at(STABILITY, d)?, at(CLASS, c)?])
}

/// The parts of a provider whose attributes `#pragma D attributes` sets, in DOF order.
const PROVIDER_PARTS: [&str; 5] = ["provider", "module", "function", "name", "args"];

impl Checker<'_> {
    /// `#pragma D attributes Name/Data/Class provider <name> <part>`: a declared provider's
    /// stability, kept for its DOF.
    fn provider_attributes(&mut self, words: &[String], line: u32) -> CResult<()> {
        if words.len() != 6 {
            return err(
                ErrTag::D_PRAGMA_MALFORM,
                line,
                "malformed #pragma attributes <attributes> provider <name> <part>",
            );
        }
        let (Some(attr), Some(part)) = (
            attribute_numbers(&words[2]),
            PROVIDER_PARTS.iter().position(|p| *p == words[5]),
        ) else {
            return err(
                ErrTag::D_PRAGMA_INVAL,
                line,
                "invalid attributes specified by #pragma attributes",
            );
        };
        self.provider_attrs.push((words[4].clone(), part, attr));
        Ok(())
    }

    /// A `provider` declaration as the program keeps it: each probe's native (C) argument types, its
    /// D (translated) types and the mapping between them. A D `string` is passed as `char *`; a
    /// translated parameter with a name takes the native parameter of that name, else the one at
    /// its position.
    pub fn cook_provider(
        &mut self,
        d: &crate::ast::ProviderDeclAst,
    ) -> CResult<dtrace_dif::program::ProviderDecl> {
        use dtrace_dif::program::{ProbeDecl, ProviderDecl};
        if d.name.ends_with(|c: char| c.is_ascii_digit()) || d.name.contains('-') {
            return err(
                ErrTag::D_PROV_BADNAME,
                d.line,
                format!("provider name may not end with a digit: {}", d.name),
            );
        }
        let mut out = ProviderDecl {
            name: d.name.clone(),
            ..Default::default()
        };
        for p in &d.probes {
            let name = p.name.replace("__", "-");
            if out.probes.iter().any(|q| q.name == name) {
                return err(
                    ErrTag::D_PROV_PRDUP,
                    p.line,
                    format!("probe {}:{} redeclared", d.name, name),
                );
            }
            let xl = p.xlated.as_ref().unwrap_or(&p.native);
            if p.native.len() > 127 || xl.len() > 127 {
                return err(
                    ErrTag::D_PROV_PRARGLEN,
                    p.line,
                    format!("probe {}:{} argument list too long", d.name, name),
                );
            }
            let mut native = Vec::new();
            for tn in &p.native {
                let t = self.resolve_type_name(tn)?;
                native.push(if self.types.is_string(t) {
                    "char *".to_string()
                } else {
                    self.tname(t)
                });
            }
            let mut xlated = Vec::new();
            let mut mapping = Vec::new();
            for (i, tn) in xl.iter().enumerate() {
                let t = self.resolve_type_name(tn)?;
                xlated.push(self.tname(t));
                let by_name = tn.decl.name.as_ref().and_then(|n| {
                    p.native
                        .iter()
                        .position(|m| m.decl.name.as_ref() == Some(n))
                });
                let from = by_name.unwrap_or(i);
                if from >= native.len() {
                    return err(
                        ErrTag::D_PROV_PRXLATOR,
                        p.line,
                        format!(
                            "probe {}:{} translated argument #{} has no native argument",
                            d.name,
                            name,
                            i + 1
                        ),
                    );
                }
                mapping.push(from as u8);
            }
            out.probes.push(ProbeDecl {
                name,
                native,
                xlated,
                mapping,
            });
        }
        Ok(out)
    }
}

/// A function or associative array parameter takes no storage class but `register`
/// (DTrace's `dt_decl_prototype`).
fn param_class(p: &crate::ast::TypeName, line: u32) -> CResult<()> {
    match p.spec.class {
        None | Some(StorageClass::Register) => Ok(()),
        Some(_) => err(
            ErrTag::D_DECL_PARMCLASS,
            line,
            "inappropriate storage class for function or associative array parameter",
        ),
    }
}
