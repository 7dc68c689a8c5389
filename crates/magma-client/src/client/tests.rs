use super::*;

fn base(url: &str) -> Result<String, String> {
    BaseUrl::parse(url)
        .map(|b| b.display)
        .map_err(|e| e.to_string())
}

#[test]
fn base_url_strips_trailing_slashes_and_keeps_the_prefix() {
    assert_eq!(
        base("http://127.0.0.1:8888").unwrap(),
        "http://127.0.0.1:8888"
    );
    assert_eq!(
        base("http://127.0.0.1:8888/").unwrap(),
        "http://127.0.0.1:8888"
    );
    assert_eq!(
        base(" http://host/prefix// ").unwrap(),
        "http://host/prefix"
    );
    assert_eq!(base("https://host/a/b/").unwrap(), "https://host/a/b");
    assert_eq!(base("http://[::1]:9000/").unwrap(), "http://[::1]:9000");
}

#[test]
fn base_url_refuses_what_it_cannot_use() {
    for (url, why) in [
        ("localhost:8888", "scheme"),
        ("ftp://host", "not http or https"),
        ("http://host/?x=1", "query"),
        ("http://user:pw@host/", "credentials"),
        ("/v1", "scheme"),
        ("", "invalid base URL"),
    ] {
        let err = base(url).unwrap_err();
        assert!(err.contains(why), "{url:?}: {err}");
    }
}

#[test]
fn zero_timeouts_are_refused() {
    let err = Client::builder("http://127.0.0.1:1")
        .timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Config(m) if m.contains("timeout")),
        "{err}"
    );
    let err = Client::builder("http://127.0.0.1:1")
        .connect_timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Config(m) if m.contains("connect timeout")),
        "{err}"
    );
}

#[test]
fn client_is_send_sync_clone() {
    fn check<T: Send + Sync + Clone + 'static>() {}
    check::<Client>();
    fn error_is_send_sync<T: Send + Sync + std::error::Error + 'static>() {}
    error_is_send_sync::<Error>();
}
