//! Part: one piece of message or artifact content (spec §4.1.6).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::Metadata;

/// The content of a part: exactly one of text, raw bytes, a URL or JSON data.
#[derive(Debug, Clone, PartialEq)]
pub enum PartContent {
    /// Plain text.
    Text(String),
    /// Inline bytes (base64 in JSON).
    Raw(Vec<u8>),
    /// A reference to content by URL.
    Url(String),
    /// Any JSON value.
    Data(Value),
}

/// One piece of content with optional media type, filename and metadata.
///
/// JSON: `{"text": "hi"}`, `{"raw": "<base64>", "mediaType": "image/png"}`,
/// `{"url": "https://…", "filename": "a.pdf"}`, `{"data": {…}}`. The 0.3 shapes
/// (`{"kind":"text",…}`, `{"kind":"file","file":{…}}`, `{"kind":"data",…}`) are
/// accepted on input.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// The content.
    pub content: PartContent,
    /// Media type such as `text/plain`.
    pub media_type: Option<String>,
    /// File name, for file-like content.
    pub filename: Option<String>,
    /// Free-form metadata.
    pub metadata: Option<Metadata>,
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::from_content(PartContent::Text(text.into()))
    }

    /// A JSON data part with media type `application/json`.
    pub fn data(value: Value) -> Self {
        let mut p = Self::from_content(PartContent::Data(value));
        p.media_type = Some("application/json".into());
        p
    }

    /// A part with `content` and nothing else set.
    pub fn from_content(content: PartContent) -> Self {
        Self {
            content,
            media_type: None,
            filename: None,
            metadata: None,
        }
    }

    /// The text, if this is a text part.
    pub fn as_text(&self) -> Option<&str> {
        match &self.content {
            PartContent::Text(t) => Some(t),
            _ => None,
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PartOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    raw: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'a Metadata>,
    #[serde(skip_serializing_if = "Option::is_none")]
    filename: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    media_type: Option<&'a str>,
}

impl Serialize for Part {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = PartOut {
            text: None,
            raw: None,
            url: None,
            data: None,
            metadata: self.metadata.as_ref(),
            filename: self.filename.as_deref(),
            media_type: self.media_type.as_deref(),
        };
        match &self.content {
            PartContent::Text(t) => out.text = Some(t),
            PartContent::Raw(b) => out.raw = Some(B64.encode(b)),
            PartContent::Url(u) => out.url = Some(u),
            PartContent::Data(d) => out.data = Some(d),
        }
        out.serialize(s)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartIn {
    text: Option<String>,
    raw: Option<String>,
    url: Option<String>,
    // `Some(Value::Null)` for an explicit `"data": null`, so that it counts as set.
    #[serde(default, deserialize_with = "present")]
    data: Option<Value>,
    metadata: Option<Metadata>,
    filename: Option<String>,
    #[serde(alias = "media_type", alias = "mimeType")]
    media_type: Option<String>,
    // 0.3 shapes
    kind: Option<String>,
    file: Option<FileIn>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileIn {
    name: Option<String>,
    #[serde(alias = "mime_type", alias = "mediaType")]
    mime_type: Option<String>,
    bytes: Option<String>,
    uri: Option<String>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let p = PartIn::deserialize(d)?;
        let mut media_type = p.media_type;
        let mut filename = p.filename;
        let mut raw = p.raw;
        let mut url = p.url;
        if let Some(f) = p.file {
            // 0.3 FilePart
            filename = filename.or(f.name);
            media_type = media_type.or(f.mime_type);
            raw = raw.or(f.bytes);
            url = url.or(f.uri);
        }
        let _ = p.kind;
        let mut contents = Vec::with_capacity(1);
        if let Some(t) = p.text {
            contents.push(PartContent::Text(t));
        }
        if let Some(r) = raw {
            let bytes = B64
                .decode(r.as_bytes())
                .or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(r.as_bytes()))
                .map_err(|e| D::Error::custom(format!("part `raw` is not valid base64: {e}")))?;
            contents.push(PartContent::Raw(bytes));
        }
        if let Some(u) = url {
            contents.push(PartContent::Url(u));
        }
        if let Some(v) = p.data {
            contents.push(PartContent::Data(v));
        }
        if contents.len() != 1 {
            return Err(D::Error::custom(
                "a part must have exactly one of `text`, `raw`, `url` or `data`",
            ));
        }
        Ok(Part {
            content: contents.pop().expect("one content"),
            media_type,
            filename,
            metadata: p.metadata,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_each_kind() {
        for v in [
            json!({"text": "hi"}),
            json!({"raw": "aGk=", "mediaType": "text/plain", "filename": "a.txt"}),
            json!({"url": "https://example.com/a.pdf"}),
            json!({"data": {"a": 1}, "mediaType": "application/json"}),
            json!({"data": [1, 2]}),
        ] {
            let p: Part = serde_json::from_value(v.clone()).unwrap();
            assert_eq!(serde_json::to_value(&p).unwrap(), v);
        }
    }

    #[test]
    fn rejects_zero_or_two_kinds() {
        assert!(serde_json::from_value::<Part>(json!({})).is_err());
        assert!(serde_json::from_value::<Part>(json!({"text": "a", "url": "b"})).is_err());
        assert!(serde_json::from_value::<Part>(json!({"raw": "%%%"})).is_err());
    }

    #[test]
    fn accepts_v03_shapes() {
        let p: Part = serde_json::from_value(json!({"kind": "text", "text": "x"})).unwrap();
        assert_eq!(p.as_text(), Some("x"));
        let p: Part = serde_json::from_value(
            json!({"kind": "file", "file": {"name": "a", "mimeType": "text/plain", "bytes": "aGk="}}),
        )
        .unwrap();
        assert_eq!(p.content, PartContent::Raw(b"hi".to_vec()));
        assert_eq!(p.media_type.as_deref(), Some("text/plain"));
    }
}
