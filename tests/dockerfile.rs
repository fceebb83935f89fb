//! `docker build` cannot run on the project's machines, so this checks what can be
//! checked without it: the Dockerfile uses paths that exist, the binary it builds
//! and runs is the one Cargo builds, the runtime stage is non-root, its config is a
//! file a mount can replace (no `A2A_GATEWAY_*` variable overrides it), and its health
//! check is `a2a-gateway health`, which follows the configured port (tested against a
//! real `serve` in tests/cli.rs).

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(name: &str) -> String {
    std::fs::read_to_string(root().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Dockerfile instructions with line continuations joined.
fn instructions() -> Vec<(String, String)> {
    let text = read("Dockerfile").replace("\\\n", " ");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (op, rest) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
            (op.to_ascii_uppercase(), rest.trim().to_owned())
        })
        .collect()
}

#[test]
fn the_dockerfile_builds_and_runs_the_cargo_binary() {
    let bin = Path::new(env!("CARGO_BIN_EXE_a2a-gateway"))
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(bin, "a2a-gateway");
    let ins = instructions();
    let run = ins
        .iter()
        .filter(|(op, _)| op == "RUN")
        .map(|(_, r)| r.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(run.contains(&format!("--bin {bin}")), "{run}");
    assert!(
        run.contains(&format!("target/release/{bin} /usr/local/bin/{bin}")),
        "{run}"
    );
    assert!(run.contains("--locked"), "{run}");
    let entry = ins
        .iter()
        .find(|(op, _)| op == "ENTRYPOINT")
        .expect("ENTRYPOINT");
    assert_eq!(entry.1, format!("[\"/usr/local/bin/{bin}\"]"));
    let cmd = ins.iter().find(|(op, _)| op == "CMD").expect("CMD");
    assert_eq!(cmd.1, "[\"serve\"]");
    // `serve` is a real subcommand of this binary.
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_a2a-gateway"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
}

#[test]
fn copied_paths_exist_and_the_context_keeps_the_build_inputs() {
    for (op, args) in instructions() {
        if op != "COPY" || args.contains("--from=") {
            continue;
        }
        let parts: Vec<&str> = args
            .split_whitespace()
            .filter(|a| !a.starts_with("--"))
            .collect();
        for src in &parts[..parts.len() - 1] {
            assert!(
                root().join(src).exists(),
                "COPY source {src} does not exist"
            );
        }
    }
    let ignore = read(".dockerignore");
    let ignored: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    for needed in [
        "Cargo.toml",
        "Cargo.lock",
        "src/",
        "config.example.toml",
        "docker/",
        "benches/",
        "examples/",
        "migrations/",
    ] {
        assert!(
            !ignored
                .iter()
                .any(|i| needed.starts_with(i.trim_end_matches('/'))),
            "{needed} is excluded by .dockerignore"
        );
    }
    assert!(
        ignored.contains(&"target/"),
        "target/ must stay out of the build context"
    );
    assert!(ignored.contains(&".git/"));
}

#[test]
fn the_runtime_stage_is_small_non_root_and_health_checked() {
    let ins = instructions();
    let froms: Vec<&str> = ins
        .iter()
        .filter(|(op, _)| op == "FROM")
        .map(|(_, r)| r.as_str())
        .collect();
    assert_eq!(froms.len(), 2, "multi-stage: {froms:?}");
    assert!(froms[0].starts_with("rust:"), "{froms:?}");
    assert!(
        froms[1].starts_with("debian:") && froms[1].contains("slim"),
        "{froms:?}"
    );
    // The Rust image is at least the crate's rust-version.
    let manifest = read("Cargo.toml");
    let msrv = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .unwrap()
        .trim_matches('"');
    let arg = ins
        .iter()
        .find_map(|(op, r)| {
            (op == "ARG")
                .then(|| r.strip_prefix("RUST_VERSION="))
                .flatten()
        })
        .expect("ARG RUST_VERSION");
    let v = |s: &str| {
        s.split('.')
            .map(|n| n.parse::<u32>().unwrap())
            .collect::<Vec<_>>()
    };
    assert!(
        v(arg) >= v(msrv),
        "rust:{arg} is older than rust-version {msrv}"
    );

    let runtime: Vec<&(String, String)> = ins
        .iter()
        .skip_while(|(op, r)| !(op == "FROM" && r.starts_with("debian:")))
        .collect();
    let user = runtime.iter().find(|(op, _)| op == "USER").expect("USER");
    assert!(
        !user.1.starts_with("root") && !user.1.starts_with("0"),
        "{user:?}"
    );
    let expose = runtime
        .iter()
        .find(|(op, _)| op == "EXPOSE")
        .expect("EXPOSE");
    let port = expose.1.trim();
    // No configuration key is set by the image's environment: a mounted file wins.
    let envs: Vec<&str> = runtime
        .iter()
        .filter(|(op, _)| op == "ENV")
        .map(|(_, r)| r.as_str())
        .collect();
    assert!(
        envs.iter()
            .all(|e| !e.contains("__") || !e.starts_with("A2A_GATEWAY_")),
        "an ENV sets a config key, which beats the mounted file: {envs:?}"
    );
    let config_path = envs
        .iter()
        .find_map(|e| e.strip_prefix("A2A_GATEWAY_CONFIG="))
        .expect("ENV A2A_GATEWAY_CONFIG");
    // The default file is copied to that path; it listens on every interface at the
    // exposed port.
    let copied = runtime
        .iter()
        .filter(|(op, _)| op == "COPY")
        .find_map(|(_, r)| {
            let parts: Vec<&str> = r.split_whitespace().collect();
            (parts.last() == Some(&config_path)).then(|| parts[0].to_owned())
        })
        .expect("a COPY to the A2A_GATEWAY_CONFIG path");
    let config = a2a_gateway::Config::load(a2a_gateway::config::ConfigSources {
        file: Some(root().join(&copied)),
        ..Default::default()
    })
    .unwrap();
    assert!(config.server.listen.ip().is_unspecified(), "{copied}");
    assert_eq!(config.server.listen.port().to_string(), port);
    let health = runtime
        .iter()
        .find(|(op, _)| op == "HEALTHCHECK")
        .expect("HEALTHCHECK");
    assert!(
        health
            .1
            .contains(r#"CMD ["/usr/local/bin/a2a-gateway", "health"]"#),
        "{health:?}"
    );
    assert!(!health.1.contains(&format!(":{port}")), "{health:?}");
    // `health` is a real subcommand of this binary.
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_a2a-gateway"))
        .args(["health", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
}
