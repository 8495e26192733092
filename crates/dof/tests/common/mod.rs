//! A DOF object with every section kind of Table 6.1, shared by the tests.
#![allow(dead_code)]

use dtrace_dof::*;

pub fn usdt() -> UsdtProvider {
    UsdtProvider {
        name: "myprov".into(),
        attrs: [
            dof_attr(5, 5, 5),
            dof_attr(1, 1, 5),
            dof_attr(1, 1, 5),
            dof_attr(5, 5, 5),
            dof_attr(5, 5, 5),
        ],
        probes: vec![
            UsdtProbe {
                function: "main".into(),
                name: "start".into(),
                addr: 0,
                offsets: vec![0x10, 0x24],
                enabled_offsets: vec![0x30],
                native_args: vec!["char *".into(), "int".into()],
                xlated_args: vec!["string".into(), "int".into()],
                arg_map: vec![0, 1],
            },
            UsdtProbe {
                function: "work".into(),
                name: "done".into(),
                addr: 0,
                offsets: vec![0x8],
                enabled_offsets: vec![],
                native_args: vec![],
                xlated_args: vec![],
                arg_map: vec![],
            },
        ],
    }
}

pub struct Sample {
    pub f: DofFile,
    pub pred: u32,
    pub act_difo: u32,
    pub provider: u32,
    pub ecb: u32,
}

pub fn sample(version: u8, encoding: u8) -> Sample {
    let mut f = DofFile::new();
    f.ident.version = version;
    f.ident.encoding = encoding;
    f.add(Section::new(SectionData::None(vec![])));
    let mut st = StrTabBuilder::new();
    let x = st.add("x");
    let pred = f.add_difo(&Difo {
        rtype: DifType {
            kind: DIF_TYPE_CTF,
            ckind: 1,
            flags: 0,
            pad: 0,
            size: 4,
        },
        text: vec![0x2901_0001, 0x0f01_0200, 0x2300_0100],
        inttab: vec![1, u64::MAX, 0x1234_5678_9abc],
        strtab: st.clone().finish(),
        vartab: vec![DifVar {
            name: x,
            id: 0x500,
            kind: DIFV_KIND_SCALAR,
            scope: DIFV_SCOPE_GLOBAL,
            flags: DIFV_F_REF | DIFV_F_MOD,
            ty: DifType {
                kind: DIF_TYPE_CTF,
                ckind: 1,
                flags: 0,
                pad: 0,
                size: 8,
            },
        }],
    });
    let act_difo = f.add_difo(&Difo {
        rtype: DifType {
            kind: DIF_TYPE_STRING,
            ckind: 0,
            flags: DIF_TF_BYREF,
            pad: 0,
            size: 256,
        },
        text: vec![0x2300_0100],
        ..Default::default()
    });
    let mut names = StrTabBuilder::new();
    let (prov, module, func, name) = (
        names.add("syscall"),
        names.add("vmlinux"),
        names.add("read"),
        names.add("entry"),
    );
    let fmt = names.add("%d\n");
    let strtab = f.add(Section::new(SectionData::StrTab(names.finish())));
    let pd = f.add(Section::new(SectionData::ProbeDesc(ProbeDesc {
        strtab,
        provider: prov,
        module,
        function: func,
        name,
        id: 0,
    })));
    let acts = f.add(Section::new(SectionData::ActDesc(vec![
        ActDesc {
            difo: act_difo,
            strtab: DOF_SECIDX_NONE,
            kind: 1,
            ntuple: 0,
            arg: 0,
            uarg: 0,
        },
        ActDesc {
            difo: DOF_SECIDX_NONE,
            strtab,
            kind: 0x0101,
            ntuple: 0,
            arg: u64::from(fmt),
            uarg: 7,
        },
    ])));
    let ecb = f.add(Section::new(SectionData::EcbDesc(EcbDesc {
        probes: pd,
        pred,
        actions: acts,
        pad: 0,
        uarg: 42,
    })));
    f.add(Section::new(SectionData::TypTab(vec![DifType {
        kind: DIF_TYPE_CTF,
        ckind: 3,
        flags: 0,
        pad: 0,
        size: 8,
    }])));
    let relnames = f.add(Section::new(SectionData::StrTab(b"\0main\0".to_vec())));
    let target = f.add(Section::new(SectionData::IntTab(vec![0, 0])));
    let rel = f.add(Section::new(SectionData::RelTab(vec![
        RelocDesc {
            name: 1,
            kind: DOF_RELO_SETX,
            offset: 8,
            data: 0,
        },
        RelocDesc {
            name: 0,
            kind: DOF_RELO_NONE,
            offset: 0,
            data: 0,
        },
    ])));
    f.add(Section::new(SectionData::URelHdr(RelocHdr {
        strtab: relnames,
        relsec: rel,
        tgtsec: target,
    })));
    f.add(Section::new(SectionData::KRelHdr(RelocHdr {
        strtab: relnames,
        relsec: rel,
        tgtsec: target,
    })));
    f.add(Section::new(SectionData::OptDesc(vec![
        OptDesc {
            option: 3,
            strtab: DOF_SECIDX_NONE,
            value: 4096,
        },
        OptDesc {
            option: 9,
            strtab: relnames,
            value: 1,
        },
    ])));
    let mut p = usdt();
    if version < DOF_VERSION_2 {
        for pr in &mut p.probes {
            pr.enabled_offsets.clear();
        }
    }
    let provider = f.add_usdt_provider(&p);
    let mut xs = StrTabBuilder::new();
    let (xty, xarg, xm) = (
        xs.add("psinfo_t"),
        xs.add_list(&["proc_t *".into()]),
        xs.add("pr_pid"),
    );
    let xstr = f.add(Section::new(SectionData::StrTab(xs.finish())));
    let members = f.add(Section::new(SectionData::XlMembers(vec![XlMember {
        difo: act_difo,
        name: xm,
        ty: DifType {
            kind: DIF_TYPE_CTF,
            ckind: 1,
            flags: 0,
            pad: 0,
            size: 4,
        },
    }])));
    let xl = Xlator {
        members,
        strtab: xstr,
        argv: xarg,
        argc: 1,
        ty: xty,
        attr: dof_attr(1, 1, 1),
    };
    let imp = f.add(Section::new(SectionData::XlImport(xl)));
    f.add(Section::new(SectionData::XlExport(xl)));
    f.add(Section::new(SectionData::XlTab(vec![XlRef {
        xlator: imp,
        member: 0,
        argn: 0,
    }])));
    f.add(Section::new(SectionData::PrExport(vec![provider, imp])));
    f.add(Section::new(SectionData::Comments(
        b"generated by tests\0".to_vec(),
    )));
    f.add(Section::new(SectionData::Source(
        b"syscall::read:entry { trace(x); }".to_vec(),
    )));
    f.add(Section::new(SectionData::Utsname(Utsname::new([
        "Linux", "host", "6.8.0", "#1 SMP", "x86_64",
    ]))));
    Sample {
        f,
        pred,
        act_difo,
        provider,
        ecb,
    }
}
