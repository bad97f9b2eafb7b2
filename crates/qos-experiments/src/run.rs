//! A user's scenarios for `clusterqos run FILE... [--quick] [--seed S]`: files, or
//! shipped scenarios by name, all for one model — their `model` key says which
//! (`gulati`, `flit`, `yum`, `nagar`) — each loaded once by that experiment and run
//! through the one path of [`crate::reproduce`]. Files a scenario names (topologies,
//! traces) are read relative to it. Errors name `file:line`.

use std::path::{Path, PathBuf};

use qos_core::source::Located;

pub use crate::experiment::read_beside;
use crate::experiment::{Experiment, Model, Source};
use crate::flit::{Flit, FlitScenario};
use crate::gulati::Gulati;
use crate::nagar::Nagar;
use crate::yum::Yum;

/// Scenarios loaded for one run, by model.
#[derive(Debug)]
pub enum Batch {
    /// The thesis's scenarios.
    Gulati(Vec<crate::gulati::Scenario>),
    /// Flit-network load sweeps (with their files).
    Flit(Vec<(String, FlitScenario)>),
    /// Yum et al.'s scenarios.
    Yum(Vec<crate::yum::Scenario>),
    /// Nagar et al.'s scenarios.
    Nagar(Vec<crate::nagar::Scenario>),
}

impl Batch {
    /// The scenarios' names.
    pub fn names(&self) -> Vec<&str> {
        match self {
            Batch::Gulati(l) => l.iter().map(|s| Gulati.name(s)).collect(),
            Batch::Flit(l) => l.iter().map(|s| Flit.name(s)).collect(),
            Batch::Yum(l) => l.iter().map(|s| Yum.name(s)).collect(),
            Batch::Nagar(l) => l.iter().map(|s| Nagar.name(s)).collect(),
        }
    }
}

/// Why the scenarios could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file could not be read.
    #[error("{file}: {source}")]
    Read {
        /// As given.
        file: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Neither a file nor a shipped scenario.
    #[error("{0}: no such file, and no shipped scenario of that name (known: {known})", known = shipped_names().join(", "))]
    Unknown(String),
    /// A scenario is malformed (`file:line: message`).
    #[error(transparent)]
    Scenario(#[from] Located),
    /// Scenarios of two models given together.
    #[error(
        "{other} is a {other_model} scenario and {first} a {first_model} one: run them separately"
    )]
    Mixed {
        /// The first scenario.
        first: String,
        /// Its model.
        first_model: Model,
        /// The first of another model.
        other: String,
        /// Its model.
        other_model: Model,
    },
}

/// Every shipped scenario: (model, name, text).
fn shipped() -> Vec<(Model, &'static str, &'static str)> {
    let mut all = Vec::new();
    for (m, list) in [
        (Model::Gulati, Gulati.builtin()),
        (Model::Nagar, Nagar.builtin()),
        (Model::Yum, Yum.builtin()),
        (Model::Flit, Flit.builtin()),
    ] {
        all.extend(list.into_iter().map(|(n, t)| (m, n, t)));
    }
    all
}

/// The names of every shipped scenario.
pub fn shipped_names() -> Vec<&'static str> {
    shipped().into_iter().map(|(_, n, _)| n).collect()
}

/// Whether `text`, in a file named neither `.toml` nor `.cfg`, is a BookSim2
/// configuration (BookSim2's own examples have no extension): not TOML, and its
/// statements, `//` comments left out, are `key = value;`.
fn looks_like_booksim(text: &str) -> bool {
    if text.parse::<toml::Table>().is_ok() {
        return false;
    }
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let code = code.trim();
    !code.is_empty()
        && code.ends_with(';')
        && code
            .split(';')
            .map(str::trim)
            .filter(|st| !st.is_empty())
            .all(|st| {
                st.split_once('=')
                    .is_some_and(|(k, _)| !k.trim().is_empty())
            })
}

/// A scenario file, or a shipped scenario by name (`idt-sweep`): its name for errors,
/// its text, and whether it is embedded. A `.cfg` file (or a file without `.toml` that
/// reads as one) is a BookSim2 configuration, read as its BookSim2-equivalent flit
/// scenario ([`crate::flit::booksim`]).
pub fn resolve(arg: &str) -> Result<Source, LoadError> {
    let path = Path::new(arg);
    if path.exists() || arg.ends_with(".toml") {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
            file: arg.to_string(),
            source,
        })?;
        let mut text = qos_core::source::decode_text(arg, bytes)?;
        if arg.ends_with(".cfg") || (!arg.ends_with(".toml") && looks_like_booksim(&text)) {
            // A BookSim2 configuration: its BookSim2-equivalent scenario.
            text = crate::flit::booksim::scenario(arg, &text, &[], None)?;
        }
        return Ok(Source {
            file: arg.to_string(),
            text,
            embedded: false,
        });
    }
    shipped()
        .into_iter()
        .find(|(_, n, _)| *n == arg)
        .map(|(m, n, t)| Source {
            file: format!("scenarios/{m}/{n}.toml"),
            text: t.to_string(),
            embedded: true,
        })
        .ok_or_else(|| LoadError::Unknown(arg.to_string()))
}

/// Loads `names` (files, or shipped scenario names): every one must declare the same
/// model; each is parsed once, by that model's experiment. With their sources, in
/// the same order.
pub fn load(names: &[String]) -> Result<(Batch, Vec<Source>), LoadError> {
    load_with(names, &[])
}

/// A `--set NAME=VALUE` argument: the assumption's name and its value (TOML: `0.05`,
/// `"4KiB"`; a bare word is a string).
pub fn parse_set(arg: &str) -> Result<(String, toml::Value), String> {
    let (name, value) = arg
        .split_once('=')
        .ok_or_else(|| format!("--set {arg}: expected NAME=VALUE"))?;
    let value = value.trim();
    let parsed = toml::from_str::<toml::Table>(&format!("v = {value}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_string()));
    Ok((name.trim().to_string(), parsed))
}

/// [`load`] with declared assumptions set to other values (`sets`: name and value),
/// each in every scenario that declares it; one that no scenario declares is an error.
pub fn load_with(
    names: &[String],
    sets: &[(String, toml::Value)],
) -> Result<(Batch, Vec<Source>), LoadError> {
    let mut files = Vec::new();
    for n in names {
        let src = resolve(n)?;
        let model = Model::of(&src.file, &src.text)?;
        files.push((src, model));
    }
    for (name, value) in sets {
        let mut found = false;
        for (src, _) in &mut files {
            let declares = crate::assume::declared(&src.file, &src.text)?
                .iter()
                .any(|a| &a.name == name);
            if declares {
                src.text = crate::assume::with_value(&src.file, &src.text, name, value)?;
                found = true;
            }
        }
        if !found {
            return Err(LoadError::Scenario(Located::whole(
                "--set",
                format!("no scenario given declares the assumption `{name}`"),
            )));
        }
    }
    let Some((first, model)) = files.first() else {
        return Ok((Batch::Gulati(Vec::new()), Vec::new()));
    };
    if let Some((other, m)) = files.iter().find(|(_, m)| m != model) {
        return Err(LoadError::Mixed {
            first: first.file.clone(),
            first_model: *model,
            other: other.file.clone(),
            other_model: *m,
        });
    }
    let model = *model;
    let sources: Vec<Source> = files.into_iter().map(|(s, _)| s).collect();
    fn each<E: Experiment>(e: &E, sources: &[Source]) -> Result<Vec<E::Scenario>, Located> {
        sources
            .iter()
            .map(|s| e.load(&s.file, &s.text, &|p| s.read(p)))
            .collect()
    }
    let batch = match model {
        Model::Gulati => Batch::Gulati(each(&Gulati, &sources)?),
        Model::Flit => Batch::Flit(each(&Flit, &sources)?),
        Model::Yum => Batch::Yum(each(&Yum, &sources)?),
        Model::Nagar => Batch::Nagar(each(&Nagar, &sources)?),
    };
    Ok((batch, sources))
}

/// The report directory of scenarios named `names`: `out`, else `report-<first name>`.
pub fn report_out<'a>(mut names: impl Iterator<Item = &'a str>, out: Option<PathBuf>) -> PathBuf {
    out.unwrap_or_else(|| {
        PathBuf::from(format!(
            "report-{}",
            names.next().unwrap_or("run").replace(['/', '\\'], "_")
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: &str =
        "model = \"flit\"\nname = \"tiny\"\n[network]\ntopology = { kind = \"mesh\", k = 2 }\n\
        router = { buffer = 4 }\nphases = { warmup = 50, measure = 200 }\n\
        [[network.classes]]\nname = \"d\"\nvls = [0]\n[sweep]\nclass = \"d\"\nrates = [0.001]\n";

    #[test]
    fn files_of_any_model_load_by_their_key_and_mixing_them_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let flit = dir.path().join("tiny.toml");
        std::fs::write(&flit, TINY).unwrap();
        let flit = flit.display().to_string();
        assert!(
            matches!(load(std::slice::from_ref(&flit)), Ok((Batch::Flit(b), _)) if b.len() == 1)
        );
        let cluster = dir.path().join("idt.toml");
        std::fs::write(&cluster, crate::gulati::builtin::find("idt-sweep").unwrap()).unwrap();
        let cluster = cluster.display().to_string();
        let Ok((Batch::Gulati(list), sources)) = load(&[cluster.clone(), "idt-sweep".into()])
        else {
            panic!("thesis scenarios")
        };
        assert_eq!(list.len(), 2);
        assert_eq!(
            sources.iter().map(|s| s.embedded).collect::<Vec<_>>(),
            [false, true]
        );
        assert_eq!(
            report_out(list.iter().map(|s| s.file.name.as_str()), None),
            PathBuf::from("report-idt-sweep")
        );
        let e = load(&[flit, cluster.clone()]).unwrap_err().to_string();
        assert!(e.contains("run them separately"), "{e}");
        // Shipped scenarios of every model by name.
        assert!(matches!(load(&["fig-5".into()]), Ok((Batch::Nagar(_), _))));
        assert!(matches!(load(&["fig7-cq".into()]), Ok((Batch::Yum(_), _))));
        assert!(matches!(
            load(&["mesh8-reference".into()]),
            Ok((Batch::Flit(_), _))
        ));
        let e = load(&["no-such-thing".into()]).unwrap_err().to_string();
        assert!(
            e.contains("no shipped scenario") && e.contains("fig7-cq"),
            "{e}"
        );
        // A file without its model key: one line naming the key.
        let bare = dir.path().join("bare.toml");
        std::fs::write(&bare, TINY.replace("model = \"flit\"\n", "")).unwrap();
        let e = load(&[bare.display().to_string()]).unwrap_err().to_string();
        assert!(
            e.contains(":1:") && e.contains("missing key `model`"),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }

    #[test]
    fn set_changes_a_declared_assumption_and_refuses_an_undeclared_one() {
        assert_eq!(
            parse_set("knee-theta=0.05").unwrap(),
            ("knee-theta".to_string(), toml::Value::Float(0.05))
        );
        assert_eq!(
            parse_set("frame-message=4KiB").unwrap().1,
            toml::Value::String("4KiB".into())
        );
        assert!(parse_set("knee-theta").is_err());
        let knee = |sets: &[(String, toml::Value)]| match load_with(&["fig-5".into()], sets) {
            Ok((Batch::Nagar(s), _)) => s[0].knee.as_ref().unwrap().theta,
            other => panic!("{:?}", other.err()),
        };
        assert_eq!(knee(&[]), 0.1);
        assert_eq!(knee(&[parse_set("knee-theta=0.05").unwrap()]), 0.05);
        let e = load_with(&["fig-5".into()], &[parse_set("no-such=1").unwrap()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no-such"), "{e}");
        // Outside the declared range: the scenario's own error.
        let e = load_with(&["fig-5".into()], &[parse_set("knee-theta=0.9").unwrap()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside its range"), "{e}");
    }

    #[test]
    fn a_booksim2_file_without_an_extension_is_read_as_one() {
        // BookSim2's own examples (`src/examples/torus88`) have no extension.
        let dir = std::env::temp_dir().join(format!("cq-bs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bs = dir.join("torus88");
        std::fs::write(
            &bs,
            "// BookSim2's defaults\ntopology = torus;\nk = 8;\nn = 2;\n\
             routing_function = dim_order;\nnum_vcs = 2; traffic = uniform;\n",
        )
        .unwrap();
        let src = resolve(bs.to_str().unwrap()).unwrap();
        assert!(src.text.contains("allocator = \"islip\""), "{}", src.text);
        // A file that is neither TOML nor `key = value;` statements stays a TOML error.
        let other = dir.join("notes");
        std::fs::write(&other, "k = 8\n").unwrap();
        let src = resolve(other.to_str().unwrap()).unwrap();
        assert_eq!(src.text, "k = 8\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
