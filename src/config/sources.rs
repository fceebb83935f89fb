//! The layers under a [`Config`](super::Config): TOML file, environment, command-line
//! overrides, and how an error is traced back to the layer that set the key.

use std::path::{Path, PathBuf};

use figment::error::Kind;
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider};

use super::ConfigSources;
use super::error::{ConfigError, ConfigOrigin, Invalid};

/// Prefix of the environment variables that set configuration keys.
pub const ENV_PREFIX: &str = "A2A_GATEWAY_";

/// Separator between levels in a variable name (`A2A_GATEWAY_UPSTREAM__AUTH__KIND`).
const ENV_SEPARATOR: &str = "__";

/// Keys whose values must never appear in an error message.
const SECRET_KEYS: &[&str] = &["client_secret", "token", "url", "sha256", "keys"];

/// One figment provider per layer, with its own name in the metadata.
struct Layer {
    name: &'static str,
    source: Option<figment::Source>,
    dict: Dict,
}

impl Provider for Layer {
    fn metadata(&self) -> Metadata {
        let metadata = Metadata::named(self.name);
        match &self.source {
            Some(source) => metadata.source(source.clone()),
            None => metadata,
        }
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        Ok(Profile::Default.collect(self.dict.clone()))
    }
}

/// The parsed config file, kept with its syntax tree to find the line of a key.
struct FileLayer {
    path: PathBuf,
    text: String,
    doc: toml_edit::ImDocument<String>,
    dict: Dict,
}

/// One key set by an environment variable or a command-line override.
struct Entry {
    /// The variable name, or the dotted key of an override.
    label: String,
    path: Vec<String>,
    /// `None`: the variable is set to the empty string, which unsets the key (its
    /// default applies, or "is required" is reported).
    value: Option<Value>,
}

/// All layers of one load, in precedence order (file < env < overrides).
pub(crate) struct Layers {
    file: Option<FileLayer>,
    env: Vec<Entry>,
    overrides: Vec<Entry>,
}

impl Layers {
    pub(crate) fn new(sources: &ConfigSources) -> Result<Self, ConfigError> {
        let file = sources.file.as_deref().map(read_file).transpose()?;
        let mut env: Vec<Entry> = sources
            .env
            .iter()
            .filter_map(|(name, value)| env_entry(name, value))
            .collect();
        env.sort_by(|a, b| a.label.cmp(&b.label));
        let overrides = sources
            .overrides
            .iter()
            .map(|(key, value)| override_entry(key, value))
            .collect::<Result<_, _>>()?;
        Ok(Layers {
            file,
            env,
            overrides,
        })
    }

    /// The file layer alone, to check its types strictly (the merged figment is extracted
    /// leniently so that `"30"` from a variable can fill a number).
    /// Keys an environment variable unsets (set to the empty string) are left out.
    pub(crate) fn file_figment(&self) -> Option<Figment> {
        self.file.as_ref().map(|file| {
            let mut dict = file.dict.clone();
            for entry in self.env.iter().filter(|e| e.value.is_none()) {
                remove(&mut dict, &entry.path);
            }
            Figment::from(Layer {
                name: "TOML file",
                source: Some(figment::Source::File(file.path.clone())),
                dict,
            })
        })
    }

    /// All layers merged, later ones winning.
    pub(crate) fn figment(&self) -> Figment {
        let mut figment = self.file_figment().unwrap_or_default();
        let entries_dict = |entries: &[Entry]| {
            let mut dict = Dict::new();
            for entry in entries {
                if let Some(value) = &entry.value {
                    insert(&mut dict, &entry.path, value.clone());
                }
            }
            dict
        };
        figment = figment.merge(Layer {
            name: "environment variable(s)",
            source: None,
            dict: entries_dict(&self.env),
        });
        figment.merge(Layer {
            name: "command-line override(s)",
            source: None,
            dict: entries_dict(&self.overrides),
        })
    }

    /// The layer that set `path` (or something above or below it), highest precedence first.
    pub(crate) fn origin_of(&self, path: &[String]) -> ConfigOrigin {
        let related =
            |entry: &&Entry| path.starts_with(&entry.path) || entry.path.starts_with(path);
        if let Some(entry) = self.overrides.iter().rev().find(related) {
            return ConfigOrigin::Override {
                key: entry.label.clone(),
            };
        }
        if let Some(entry) = self.env.iter().rev().find(related) {
            return ConfigOrigin::Env {
                var: entry.label.clone(),
            };
        }
        if let Some(file) = &self.file
            && let Some(line) = file.locate(path)
        {
            return ConfigOrigin::File {
                path: file.path.clone(),
                line,
            };
        }
        ConfigOrigin::Default
    }

    /// A validation failure, with the origin of its key attached.
    pub(crate) fn invalid(&self, invalid: Invalid) -> ConfigError {
        // Keys split as TOML does (an agent id with a dot is quoted: `agents."a.b"`).
        let path = super::agents::split_dotted;
        // Where the key itself was set; where the key it conflicts with was set only
        // when the key is not set at all (`tls_key_file` missing beside `tls_cert_file`).
        let mut message = invalid.message;
        let origin = match self.origin_of(&path(&invalid.key)) {
            ConfigOrigin::Default => self.origin_of(&path(&invalid.origin_key)),
            set => {
                // Both set (a secret and its `*_file`): say where the other one came
                // from too, the environment often being the surprise.
                if invalid.origin_key != invalid.key {
                    let other = self.origin_of(&path(&invalid.origin_key));
                    if other != ConfigOrigin::Default {
                        message = format!("{message} ({} is set by {other})", invalid.origin_key);
                    }
                }
                set
            }
        };
        ConfigError::Invalid {
            key: invalid.key,
            origin,
            message,
        }
    }

    /// The first error of a figment extraction as one message naming key and origin.
    pub(crate) fn figment_error(&self, error: figment::Error) -> ConfigError {
        let error = error
            .into_iter()
            .next()
            .expect("a figment error holds at least one");
        let mut path = error.path.clone();
        let mut origin_path = None;
        let secret = path
            .last()
            .is_some_and(|last| SECRET_KEYS.contains(&last.as_str()));
        let message = match &error.kind {
            Kind::UnknownField(name, expected) => {
                if path.last() != Some(name) {
                    path.push(name.clone());
                }
                if expected.is_empty() {
                    "unknown key".to_owned()
                } else {
                    format!("unknown key; expected one of: {}", expected.join(", "))
                }
            }
            Kind::UnknownVariant(value, expected) => {
                format!(
                    "unknown value {value:?}; expected one of: {}",
                    expected.join(", ")
                )
            }
            Kind::MissingField(name) => {
                origin_path = Some(path.clone());
                path.push(name.to_string());
                "is required".to_owned()
            }
            Kind::InvalidType(actual, expected) if !secret => {
                match (huge_integer(actual), range_in_words(expected)) {
                    (Some(n), Some(range)) => {
                        format!("the number {n} is out of range: expected {range}")
                    }
                    _ => format!(
                        "expected {}, found {}",
                        in_words(expected),
                        found_in_words(actual)
                    ),
                }
            }
            Kind::InvalidType(_, expected) => format!("expected {}", in_words(expected)),
            Kind::InvalidValue(actual, expected) if !secret => match range_in_words(expected) {
                Some(range) if is_number(actual) => {
                    format!(
                        "{} is out of range: expected {range}",
                        found_in_words(actual)
                    )
                }
                _ => format!(
                    "invalid value {}, expected {}",
                    found_in_words(actual),
                    in_words(expected)
                ),
            },
            Kind::InvalidValue(_, expected) => {
                format!("invalid value, expected {}", in_words(expected))
            }
            // std's `SocketAddr` parse error, for `listen`, `grpc_listen`, ...
            Kind::Message(message) if message == "invalid socket address syntax" => {
                "expected an IP address and a port from 0 to 65535, such as 127.0.0.1:8080, \
                 0.0.0.0:8080 or [::]:8080 (a host name such as localhost is not accepted)"
                    .to_owned()
            }
            Kind::Message(message) => message.clone(),
            other => other.to_string(),
        };
        let origin = self.origin_of(origin_path.as_deref().unwrap_or(&path));
        ConfigError::Invalid {
            key: path.join("."),
            origin,
            message,
        }
    }
}

fn read_file(path: &Path) -> Result<FileLayer, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFile {
        path: path.to_owned(),
        source,
    })?;
    let syntax = |message: &str, offset: Option<usize>| {
        // The parser's message can span lines; the error is one line.
        let message = message.trim().lines().collect::<Vec<_>>().join("; ");
        let (line, column) = offset.map_or((1, 1), |o| line_col(&text, o));
        ConfigError::Syntax {
            path: path.to_owned(),
            line,
            column,
            message,
        }
    };
    let dict: Dict =
        toml::from_str(&text).map_err(|e| syntax(e.message(), e.span().map(|s| s.start)))?;
    let doc = toml_edit::ImDocument::parse(text.clone())
        .map_err(|e| syntax(e.message(), e.span().map(|s| s.start)))?;
    Ok(FileLayer {
        path: path.to_owned(),
        text,
        doc,
        dict,
    })
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.len(), |nl| before.len() - nl - 1)
        + 1;
    (line, column)
}

impl FileLayer {
    /// `Some(line)` when the file sets `path` (or a value where a table on `path` was
    /// expected); `None` when the file does not mention it.
    fn locate(&self, path: &[String]) -> Option<Option<usize>> {
        use toml_edit::{Item, Table, Value as TomlValue};

        enum Node<'a> {
            Item(&'a Item),
            Table(&'a Table),
            Value(&'a TomlValue),
        }

        let mut node = Node::Table(self.doc.as_table());
        let mut span = None;
        for segment in path {
            let (next, next_span) = match node {
                Node::Table(table) | Node::Item(Item::Table(table)) => {
                    let (key, item) = table.get_key_value(segment)?;
                    (Node::Item(item), key.span())
                }
                Node::Item(Item::ArrayOfTables(array)) => {
                    let table = array.get(segment.parse().ok()?)?;
                    (Node::Table(table), table.span())
                }
                Node::Item(Item::Value(value)) | Node::Value(value) => match value {
                    TomlValue::InlineTable(table) => {
                        let (key, item) = table.get_key_value(segment)?;
                        (Node::Item(item), key.span())
                    }
                    TomlValue::Array(array) => {
                        let value = array.get(segment.parse().ok()?)?;
                        (Node::Value(value), value.span())
                    }
                    // A scalar where a table was expected: that scalar is the culprit.
                    _ => break,
                },
                Node::Item(Item::None) => return None,
            };
            node = next;
            span = next_span.or(span);
        }
        Some(span.map(|span| line_col(&self.text, span.start).0))
    }
}

/// A config key from an environment variable, or `None` for a variable that is not one:
/// without the prefix, or without `__` after it (such as `A2A_GATEWAY_CONFIG`).
fn env_entry(name: &str, value: &str) -> Option<Entry> {
    let prefix = name.get(..ENV_PREFIX.len())?;
    if !prefix.eq_ignore_ascii_case(ENV_PREFIX) {
        return None;
    }
    let rest = &name[ENV_PREFIX.len()..];
    if !rest.contains(ENV_SEPARATOR) {
        return None;
    }
    let path = rest
        .split(ENV_SEPARATOR)
        .filter(|segment| !segment.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    Some(Entry {
        label: name.to_owned(),
        path,
        value: (!value.is_empty()).then(|| env_value(value)),
    })
}

/// An environment value as a figment value.
///
/// Scalars stay strings, so a secret or id such as `0123` keeps its exact text; numbers and
/// booleans are read from the string when the key expects one (lossy extraction). Arrays and
/// tables are read as a TOML inline array or table (`["a", 'b\c']`, `{k = "v\"w"}`, the
/// form `keys new` prints, with TOML's escapes and literal strings); what is not valid TOML
/// (`[a, b]`) is parsed as figment's `Env` provider would.
fn env_value(raw: &str) -> Value {
    let trimmed = raw.trim_start();
    if trimmed.starts_with('[') || trimmed.starts_with('{') {
        let as_toml = toml::from_str::<toml::Table>(&format!("value = {raw}"))
            .ok()
            .and_then(|mut table| table.remove("value"))
            .and_then(|value| Value::serialize(value).ok());
        as_toml.unwrap_or_else(|| raw.parse().unwrap_or_else(|never| match never {}))
    } else {
        Value::from(raw.to_owned())
    }
}

fn override_entry(key: &str, value: &toml::Value) -> Result<Entry, ConfigError> {
    let invalid = |message: String| ConfigError::Invalid {
        key: key.to_owned(),
        origin: ConfigOrigin::Override {
            key: key.to_owned(),
        },
        message,
    };
    let path: Vec<String> = key.split('.').map(str::to_owned).collect();
    if path.iter().any(String::is_empty) {
        return Err(invalid(
            "not a dotted key such as `server.listen`".to_owned(),
        ));
    }
    let value = Value::serialize(value).map_err(|e| invalid(e.to_string()))?;
    Ok(Entry {
        label: key.to_owned(),
        path,
        value: Some(value),
    })
}

/// Removes `path` from `dict` (nothing when it is not there).
fn remove(dict: &mut Dict, path: &[String]) {
    match path {
        [] => {}
        [last] => {
            dict.remove(last);
        }
        [first, rest @ ..] => {
            if let Some(Value::Dict(_, child)) = dict.get_mut(first) {
                remove(child, rest);
            }
        }
    }
}

/// Serde's name of an expected type in words an operator reads: `u64` is "a whole
/// number", `f64` "a number".
fn in_words(expected: &str) -> String {
    let e = expected.trim();
    if range_in_words(e).is_some() || e.starts_with("a nonzero") || e.contains("integer") {
        "a whole number".to_owned()
    } else if e == "f32" || e == "f64" {
        "a number".to_owned()
    } else if e == "bool" || e == "a boolean" {
        "a boolean (true or false)".to_owned()
    } else if e == "string" || e == "str" || e == "a borrowed string" {
        "a string".to_owned()
    } else {
        e.to_owned()
    }
}

/// The values an integer type takes, in words (`u8` is "a whole number from 0 to 255"),
/// for a number the type cannot hold; `None` for other types.
fn range_in_words(expected: &str) -> Option<String> {
    let range = |min: &str, max: &str| Some(format!("a whole number from {min} to {max}"));
    match expected.trim() {
        "u8" => range("0", "255"),
        "u16" => range("0", "65535"),
        "u32" => range("0", "4294967295"),
        // Every count the configuration holds is at most i64::MAX (`check_number_bounds`).
        "u64" | "usize" => range("0", "9223372036854775807"),
        "u128" => Some("a whole number of 0 or more".to_owned()),
        "i8" => range("-128", "127"),
        "i16" => range("-32768", "32767"),
        "i32" => range("-2147483648", "2147483647"),
        "i64" | "i128" | "isize" => Some("a whole number".to_owned()),
        _ => None,
    }
}

/// The digits of a number too large for the integers figment reads, which serde
/// reports as "integer `N` as u128" (or i128): `Some(N)`.
fn huge_integer(actual: &figment::error::Actual) -> Option<&str> {
    match actual {
        figment::error::Actual::Other(s) => s
            .strip_prefix("integer `")?
            .split_once('`')
            .map(|(digits, _)| digits),
        _ => None,
    }
}

/// Whether figment found a number.
fn is_number(actual: &figment::error::Actual) -> bool {
    use figment::error::Actual;
    matches!(
        actual,
        Actual::Unsigned(_) | Actual::Signed(_) | Actual::Float(_)
    )
}

/// Figment's description of a found value without Rust type names.
fn found_in_words(actual: &figment::error::Actual) -> String {
    use figment::error::Actual;
    match actual {
        Actual::Bool(b) => format!("the boolean {b}"),
        Actual::Unsigned(n) => format!("the number {n}"),
        Actual::Signed(n) => format!("the number {n}"),
        // `{:?}` keeps the fraction of 1e3 ("1000.0"), so a fraction is seen as one.
        Actual::Float(n) => format!("the number {n:?}"),
        Actual::Char(c) => format!("the string {:?}", c.to_string()),
        Actual::Str(s) => format!("the string {s:?}"),
        Actual::Map => "a table".to_owned(),
        Actual::Seq => "an array".to_owned(),
        other => other.to_string(),
    }
}

/// Sets `path` in `dict` to `value`, creating tables on the way.
fn insert(dict: &mut Dict, path: &[String], value: Value) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        dict.insert(first.clone(), value);
        return;
    }
    let child = dict
        .entry(first.clone())
        .or_insert_with(|| Value::from(Dict::new()));
    if !matches!(child, Value::Dict(..)) {
        *child = Value::from(Dict::new());
    }
    if let Value::Dict(_, child) = child {
        insert(child, rest, value);
    }
}
