//! Credentials in configured URLs never reach what the gateway prints (issue 43, item
//! 6): `a2a-gateway serve` as its own process with a user-info password and a
//! secret-looking query value in every URL it contacts or prints, while those fetches
//! fail (which is when the URLs are printed). The places that format a configured URL:
//!
//! | URL | printed by |
//! |---|---|
//! | `server.auth.jwt.jwks_url` | the JWKS fetch's WARN line and `/readyz` |
//! | `server.auth.jwt.discovery_url` | the same, through the discovery fetch |
//! | `upstream.auth.token_url` | the token request's WARN line and the task's log |
//! | `upstream.url` | the start-up and request lines |
//! | `server.public_url` | the start-up INFO line (one with credentials is refused at start) |
//! | `store.url` | the start-up INFO line (tested in `tests/cli.rs` for `check-config`) |
//! | the client commands' own `--url` | their error lines (`send`, `card`, `get`, `health`), and the URL reqwest names in a transport error |
//!
//! Each must show the URL masked (`***`), never the secret.

use std::time::Duration;

use a2a_gateway::test_util::GatewayProcess;

const BIN: &str = env!("CARGO_BIN_EXE_a2a-gateway");

const SECRETS: [&str; 6] = [
    "JWKSPASS",
    "JWKSQUERY",
    "DISCPASS",
    "TOKPASS",
    "TOKQUERY",
    "UPPASS",
];

fn gateway(jwks: &str) -> GatewayProcess {
    GatewayProcess::init(BIN)
        .config(format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n\
             [server.auth]\nkind = \"jwt\"\n\n\
             [server.auth.jwt]\nissuer = \"https://issuer.example\"\naudience = [\"gw\"]\n{jwks}\n\n\
             [store]\nurl = \"memory:\"\n\n\
             [upstream]\nurl = \"http://up:UPPASS@127.0.0.1:9/invocations\"\nmax_retries = 0\n\
             stop_session_on_cancel = false\n\n\
             [upstream.auth]\nkind = \"oauth2\"\nclient_id = \"c\"\nclient_secret = \"s\"\n\
             token_url = \"http://tok:TOKPASS@127.0.0.1:9/token?client_secret=TOKQUERY\"\n\n\
             [log]\nlevel = \"debug\"\n"
        ))
        .arg("serve")
        .timeout(Duration::from_secs(20))
        .start()
}

fn assert_masked(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{what} shows {secret}: {text}");
    }
}

#[tokio::test]
async fn a_failing_jwks_fetch_shows_its_url_masked_in_logs_and_readyz() {
    for jwks in [
        "jwks_url = \"http://jw:JWKSPASS@127.0.0.1:9/jwks.json?token=JWKSQUERY\"",
        "discovery_url = \"http://di:DISCPASS@127.0.0.1:9/.well-known/openid-configuration\"",
    ] {
        let gw = gateway(jwks);
        let logs = gw.logs_when(|l| l.contains("JWKS fetch failed"), Duration::from_secs(10));
        assert!(logs.contains("JWKS fetch failed"), "{logs}");
        assert!(
            logs.contains(":***@127.0.0.1:9"),
            "the URL is named, masked: {logs}"
        );
        let readyz = reqwest::get(format!("{}readyz", gw.url)).await.unwrap();
        assert_eq!(readyz.status(), 503);
        let body = readyz.text().await.unwrap();
        assert_masked("/readyz", &body);
        assert_masked("the log", &gw.logs());
    }
}

/// The client commands print the user's own `--url` in their error lines (a closed
/// port, a server that answers 404 to everything): masked, as the server masks its URLs.
/// The command they print for a reply (`send`'s "reply with") keeps the URL whole, on
/// purpose: it is a command to run, on the user's own terminal.
#[tokio::test]
async fn the_client_commands_show_their_own_url_masked_in_error_lines() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = free.local_addr().unwrap().port();
    drop(free);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let answering = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, axum::Router::new()).await });
    let dir = tempfile::tempdir().unwrap();
    for port in [closed, answering] {
        let url = format!("http://me:CLIPASS@127.0.0.1:{port}/?token=CLIQUERY&x=1");
        let cases: [&[&str]; 6] = [
            &["send", "--url", &url, "hi"],
            &["card", "--url", &url],
            &["get", "--binding", "rest", "--url", &url, "t1"],
            &["get", "--binding", "jsonrpc", "--url", &url, "t1"],
            &["send", "--binding", "rest", "--url", &url, "--stream", "hi"],
            &["health", "--url", &url],
        ];
        for args in cases {
            let out = GatewayProcess::init(BIN)
                .current_dir(dir.path())
                .args(args)
                .timeout(Duration::from_secs(30))
                .run_async()
                .await;
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
            assert!(
                stderr.contains(&format!("me:***@127.0.0.1:{port}")),
                "{args:?} names the URL, masked: {stderr}"
            );
            for secret in ["CLIPASS", "CLIQUERY"] {
                assert!(
                    !stderr.contains(secret),
                    "{args:?} shows {secret}: {stderr}"
                );
                assert!(
                    !stdout.contains(secret),
                    "{args:?} shows {secret}: {stdout}"
                );
            }
        }
    }
}
