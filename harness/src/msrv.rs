//! `cargo xtask msrv`: the libraries' real minimum Rust version, derived from `Cargo.lock`.
//!
//! The minimum a user's compiler must have is the highest `rust-version` among the published
//! crates and everything they depend on to build (normal and build dependencies, every
//! optional feature, every target platform), as `Cargo.lock` resolves them. This command
//! computes it from `cargo metadata --locked --all-features`, fails unless it equals
//! `[workspace.package] rust-version` (which every published crate inherits), and fails unless
//! the README states it. It also reports the toolchain the tests need (dev-dependencies
//! included), which may be higher, and requires the README to state that one too.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::process::cargo;

/// A `rust-version`: `1.85` or `1.85.0`, compared numerically.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct RustVersion(u64, u64, u64);

impl RustVersion {
    pub(crate) fn parse(text: &str) -> Option<RustVersion> {
        let mut parts = text.trim().split('.').map(|p| p.parse::<u64>().ok());
        let major = parts.next()??;
        let minor = parts.next()??;
        let patch = parts.next().unwrap_or(Some(0))?;
        if parts.next().is_some() {
            return None;
        }
        Some(RustVersion(major, minor, patch))
    }
}

impl fmt::Display for RustVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.2 == 0 {
            write!(f, "{}.{}", self.0, self.1)
        } else {
            write!(f, "{}.{}.{}", self.0, self.1, self.2)
        }
    }
}

/// The highest `rust-version` reached from some packages, and who declares it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Minimum {
    pub(crate) version: RustVersion,
    pub(crate) declared_by: BTreeSet<String>,
}

/// A dependency edge: the package id and its kinds (`None` normal, `build`, `dev`).
type Edge = (String, Vec<Option<String>>);

/// The resolved graph of `cargo metadata` (packages by id, their dependencies with kinds).
pub(crate) struct Graph {
    packages: HashMap<String, Value>,
    deps: HashMap<String, Vec<Edge>>,
    members: Vec<String>,
}

impl Graph {
    pub(crate) fn from_metadata(meta: &Value) -> Result<Graph> {
        let packages = meta["packages"]
            .as_array()
            .context("cargo metadata: no packages")?
            .iter()
            .filter_map(|p| Some((p["id"].as_str()?.to_owned(), p.clone())))
            .collect();
        let mut deps = HashMap::new();
        for node in meta["resolve"]["nodes"]
            .as_array()
            .context("cargo metadata: no resolve graph")?
        {
            let id = node["id"].as_str().unwrap_or_default().to_owned();
            let edges = node["deps"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| {
                    let kinds = d["dep_kinds"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|k| k["kind"].as_str().map(str::to_owned))
                        .collect();
                    (d["pkg"].as_str().unwrap_or_default().to_owned(), kinds)
                })
                .collect();
            deps.insert(id, edges);
        }
        let members = meta["workspace_members"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m.as_str().map(str::to_owned))
            .collect();
        Ok(Graph {
            packages,
            deps,
            members,
        })
    }

    fn name<'a>(&'a self, id: &'a str) -> &'a str {
        self.packages
            .get(id)
            .and_then(|p| p["name"].as_str())
            .unwrap_or(id)
    }

    /// Workspace members that may be published (`publish` not `false`/`[]`).
    pub(crate) fn publishable(&self) -> Vec<String> {
        self.members
            .iter()
            .filter(|id| {
                self.packages
                    .get(*id)
                    .is_some_and(|p| p["publish"].as_array().is_none_or(|r| !r.is_empty()))
            })
            .cloned()
            .collect()
    }

    /// The highest `rust-version` among `roots` and every package they need to build;
    /// with `dev`, the roots' dev-dependencies (and what those need to build) too.
    pub(crate) fn minimum(&self, roots: &[String], dev: bool) -> Minimum {
        // A root is visited as a root (its dev-dependencies count) even when another root
        // depends on it: visits are keyed by (package, as a root).
        let mut visited = BTreeSet::new();
        let mut seen = BTreeSet::new();
        let mut stack: Vec<(String, bool)> = roots.iter().map(|r| (r.clone(), true)).collect();
        while let Some((id, is_root)) = stack.pop() {
            if !visited.insert((id.clone(), is_root)) {
                continue;
            }
            seen.insert(id.clone());
            for (dep, kinds) in self.deps.get(&id).into_iter().flatten() {
                let builds = kinds
                    .iter()
                    .any(|k| k.is_none() || k.as_deref() == Some("build"));
                let tests = dev && is_root && kinds.iter().any(|k| k.as_deref() == Some("dev"));
                if builds || tests {
                    stack.push((dep.clone(), false));
                }
            }
        }
        let mut minimum = Minimum {
            version: RustVersion(1, 0, 0),
            declared_by: BTreeSet::new(),
        };
        for id in &seen {
            let Some(version) = self
                .packages
                .get(id)
                .and_then(|p| p["rust_version"].as_str())
                .and_then(RustVersion::parse)
            else {
                continue;
            };
            if version > minimum.version {
                minimum.version = version;
                minimum.declared_by.clear();
            }
            if version == minimum.version {
                minimum.declared_by.insert(self.name(id).to_owned());
            }
        }
        minimum
    }

    /// `rust-version` of a package, as declared.
    pub(crate) fn declared(&self, id: &str) -> Option<RustVersion> {
        self.packages
            .get(id)
            .and_then(|p| p["rust_version"].as_str())
            .and_then(RustVersion::parse)
    }
}

/// `cargo metadata --locked --all-features` of the workspace at `root`.
pub(crate) fn metadata(root: &Path) -> Result<Value> {
    let out = cargo()
        .current_dir(root)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--all-features",
        ])
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata --locked failed (is Cargo.lock up to date?):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).context("parsing cargo metadata")
}

pub fn run() -> Result<()> {
    let root = crate::project_root()?;
    let graph = Graph::from_metadata(&metadata(&root)?)?;
    let published = graph.publishable();
    if published.is_empty() {
        bail!("no publishable crate in the workspace");
    }
    let libraries = graph.minimum(&published, false);
    // `cargo test --workspace` builds every member, published or not, with its
    // dev-dependencies.
    let tests = graph.minimum(&graph.members, true);
    let names: Vec<&str> = published.iter().map(|id| graph.name(id)).collect();
    println!(
        "xtask msrv: the libraries ({}) need Rust {} at least: the highest rust-version among \
         them and their normal and build dependencies in Cargo.lock, all features, all \
         platforms (declared by {})",
        names.join(", "),
        libraries.version,
        join(&libraries.declared_by)
    );
    println!(
        "xtask msrv: `cargo test --workspace` needs Rust {} (every member, dev-dependencies \
         included; declared by {})",
        tests.version,
        join(&tests.declared_by)
    );

    let mut problems = Vec::new();
    for id in &published {
        match graph.declared(id) {
            Some(v) if v == libraries.version => {}
            Some(v) => problems.push(format!(
                "{} declares rust-version {v}, but its real minimum is {} (set \
                 [workspace.package] rust-version = \"{}\")",
                graph.name(id),
                libraries.version,
                libraries.version
            )),
            None => problems.push(format!(
                "{} declares no rust-version (inherit [workspace.package] rust-version)",
                graph.name(id)
            )),
        }
    }
    let readme = std::fs::read_to_string(root.join("README.md")).context("reading README.md")?;
    for (what, version) in [("libraries", libraries.version), ("tests", tests.version)] {
        let phrase = format!("Rust {version}");
        if !readme.contains(&phrase) {
            problems.push(format!(
                "README.md does not state the {what}' minimum: no \"{phrase}\" in it"
            ));
        }
    }
    if !problems.is_empty() {
        bail!("MSRV check failed:\n  {}", problems.join("\n  "));
    }
    println!(
        "xtask msrv: ok: rust-version {} is the libraries' real minimum and README.md states it \
         and the tests' {}",
        libraries.version, tests.version
    );
    Ok(())
}

fn join(names: &BTreeSet<String>) -> String {
    names.iter().cloned().collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph() -> Graph {
        // app -> lib (normal) -> old (normal); lib -> gen (build); app -> bench (dev) -> new;
        // lib -> tool (dev, not a root's).
        let meta = serde_json::json!({
            "workspace_members": ["app", "lib", "internal"],
            "packages": [
                {"id": "app", "name": "app", "rust_version": "1.80", "publish": null},
                {"id": "internal", "name": "internal", "rust_version": "1.99", "publish": []},
                {"id": "lib", "name": "lib", "rust_version": "1.83.1", "publish": null},
                {"id": "old", "name": "old", "rust_version": null, "publish": null},
                {"id": "gen", "name": "gen", "rust_version": "1.84", "publish": null},
                {"id": "bench", "name": "bench", "rust_version": "1.86", "publish": null},
                {"id": "new", "name": "new", "rust_version": "1.88", "publish": null},
                {"id": "tool", "name": "tool", "rust_version": "1.95", "publish": null}
            ],
            "resolve": {"nodes": [
                {"id": "app", "deps": [
                    {"pkg": "lib", "dep_kinds": [{"kind": null}]},
                    {"pkg": "bench", "dep_kinds": [{"kind": "dev"}]}]},
                {"id": "internal", "deps": []},
                {"id": "lib", "deps": [
                    {"pkg": "old", "dep_kinds": [{"kind": null}]},
                    {"pkg": "gen", "dep_kinds": [{"kind": "build"}]},
                    {"pkg": "tool", "dep_kinds": [{"kind": "dev"}]}]},
                {"id": "old", "deps": []},
                {"id": "gen", "deps": []},
                {"id": "bench", "deps": [{"pkg": "new", "dep_kinds": [{"kind": null}]}]},
                {"id": "new", "deps": []},
                {"id": "tool", "deps": []}
            ]}
        });
        Graph::from_metadata(&meta).unwrap()
    }

    #[test]
    fn the_minimum_follows_normal_and_build_edges_and_the_roots_dev_edges() {
        let g = graph();
        // `app` depends on `lib`, both published: `lib`'s dev-dependency `tool` counts for
        // the tests, whichever is visited first.
        assert_eq!(g.publishable(), ["app", "lib"]);
        let libs = g.minimum(&g.publishable(), false);
        assert_eq!(libs.version, RustVersion(1, 84, 0));
        assert_eq!(libs.declared_by.iter().collect::<Vec<_>>(), ["gen"]);
        let tests = g.minimum(&g.publishable(), true);
        assert_eq!(tests.version, RustVersion(1, 95, 0));
        assert_eq!(tests.declared_by.iter().collect::<Vec<_>>(), ["tool"]);
        // A dependency's own dev-dependencies never count.
        let app_only = g.minimum(&["app".to_owned()], true);
        assert_eq!(app_only.version, RustVersion(1, 88, 0));
        assert_eq!(app_only.declared_by.iter().collect::<Vec<_>>(), ["new"]);
    }

    #[test]
    fn versions_parse_and_compare_numerically() {
        assert_eq!(RustVersion::parse("1.85"), Some(RustVersion(1, 85, 0)));
        assert_eq!(RustVersion::parse("1.85.0"), RustVersion::parse("1.85"));
        assert!(RustVersion::parse("1.100").unwrap() > RustVersion::parse("1.99.9").unwrap());
        assert_eq!(RustVersion::parse("1"), None);
        assert_eq!(RustVersion::parse("1.x"), None);
        assert_eq!(RustVersion(1, 85, 0).to_string(), "1.85");
        assert_eq!(RustVersion(1, 85, 1).to_string(), "1.85.1");
    }
}
