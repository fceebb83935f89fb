//! The A2A values a test sends, in ProtoJSON (A2A 1.0, the JSON-RPC and REST bindings).

use serde_json::{Value, json};

/// A user `Message` with one text part and a fresh random `messageId`:
/// `{"messageId": "<uuid>", "role": "ROLE_USER", "parts": [{"text": text}]}`.
pub fn user_message(text: &str) -> Value {
    json!({
        "messageId": uuid::Uuid::new_v4().to_string(),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_message_has_its_own_id() {
        let (a, b) = (user_message("hi"), user_message("hi"));
        assert_ne!(a["messageId"], b["messageId"]);
        assert_eq!(a["role"], "ROLE_USER");
        assert_eq!(a["parts"], json!([{"text": "hi"}]));
    }
}
