//! Benchmark: compile time of a ~300-line D script (figures printed, never asserted).

use std::time::Instant;

fn script(clauses: usize) -> String {
    let mut s = String::from("#pragma D option quiet\n\ninline int LIMIT = 100;\n\n");
    for i in 0..clauses {
        s.push_str(&format!(
            "syscall::read{i}:entry\n/pid == $target && self->ts{i} == 0/\n{{\n\tself->ts{i} = timestamp;\n\tself->fd = arg0;\n\t@calls[probefunc, execname] = count();\n\tthis->x = arg2 * 2 + {i};\n}}\n\nsyscall::read{i}:return\n/self->ts{i}/\n{{\n\t@lat[probefunc] = quantize(timestamp - self->ts{i});\n\t@sz = lquantize(arg0, 0, 1000, 10);\n\tprintf(\"%s %d %d\\n\", execname, pid, arg0);\n\tself->ts{i} = 0;\n}}\n\n"
        ));
    }
    s.push_str("END\n{\n\tprinta(\"%s %s %@d\\n\", @calls);\n\ttrunc(@lat, 10);\n}\n");
    s
}

fn main() {
    for clauses in [16, 30] {
        bench(&script(clauses));
    }
}

fn bench(src: &str) {
    let lines = src.lines().count();
    let opts = dtrace_compiler::CompileOptions {
        macros: vec![("target".into(), "1234".into())],
        ..Default::default()
    };
    // warm up
    for _ in 0..5 {
        dtrace_compiler::compile(src, &opts).expect("compiles");
    }
    let n = 200;
    let t = Instant::now();
    for _ in 0..n {
        dtrace_compiler::compile(src, &opts).expect("compiles");
    }
    let per = t.elapsed() / n;
    println!("compile: {lines}-line script: {per:?} per compile ({n} iterations)");
}
