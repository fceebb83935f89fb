//! Counting the fields of an encoded protobuf message before prost decodes it, so a
//! gRPC request is held to the same [`MAX_REQUEST_VALUES`] as a JSON one.
//!
//! prost turns every element of a `google.protobuf.ListValue` into a `Value` of 32
//! bytes, which may take only two bytes on the wire (`0a 00`): a 10 MiB request of
//! nulls decodes into hundreds of MiB before the service sees it. The walk here reads
//! the wire format guided by the message's descriptor (from the descriptor pool of
//! [`super::json`]), descends into every field of a message type, and counts one per
//! field occurrence, allocating nothing. Malformed input stops the walk; prost then
//! refuses it.
//!
//! [`MAX_REQUEST_VALUES`]: crate::protocol::value_count::MAX_REQUEST_VALUES

use prost_reflect::{Kind, MessageDescriptor};

use crate::protocol::value_count::TooManyValues;

/// How deep the walk descends: prost refuses messages nested deeper than 100.
const MAX_DEPTH: u32 = 100;

/// Checks that the encoded message `bytes` of type `desc` has at most `limit` field
/// occurrences, counted through every nested message (each element of a repeated
/// field counts one; a packed scalar field counts one; unknown fields count one each).
///
/// # Errors
/// [`TooManyValues`] as soon as the count passes `limit`. Bytes that are not a valid
/// encoding end the walk without an error: prost's decoder reports them.
pub fn check(bytes: &[u8], desc: &MessageDescriptor, limit: usize) -> Result<(), TooManyValues> {
    let mut left = limit;
    match walk(bytes, Some(desc), 0, &mut left) {
        Err(Stop::TooMany) => Err(TooManyValues { limit }),
        Ok(()) | Err(Stop::Malformed) => Ok(()),
    }
}

/// Why a walk ended early.
enum Stop {
    TooMany,
    Malformed,
}

/// Counts the fields of `bytes` (a message of `desc`, unknown when `None`) into
/// `left`.
fn walk(
    mut bytes: &[u8],
    desc: Option<&MessageDescriptor>,
    depth: u32,
    left: &mut usize,
) -> Result<(), Stop> {
    if depth > MAX_DEPTH {
        return Err(Stop::Malformed);
    }
    // Fields inside a group (wire types 3 and 4, which proto3 does not define) are
    // unknown fields to prost, which skips them without allocating; they still count.
    let mut group_depth = 0u32;
    while !bytes.is_empty() {
        let tag = varint(&mut bytes)?;
        *left = left.checked_sub(1).ok_or(Stop::TooMany)?;
        let number = u32::try_from(tag >> 3).map_err(|_| Stop::Malformed)?;
        match tag & 7 {
            0 => {
                varint(&mut bytes)?;
            }
            1 => bytes = bytes.get(8..).ok_or(Stop::Malformed)?,
            5 => bytes = bytes.get(4..).ok_or(Stop::Malformed)?,
            2 => {
                let len = usize::try_from(varint(&mut bytes)?).map_err(|_| Stop::Malformed)?;
                let (inner, rest) = bytes.split_at_checked(len).ok_or(Stop::Malformed)?;
                bytes = rest;
                let field = desc
                    .filter(|_| group_depth == 0)
                    .and_then(|d| d.get_field(number));
                if let Some(Kind::Message(nested)) = field.map(|f| f.kind()) {
                    walk(inner, Some(&nested), depth + 1, left)?;
                }
            }
            3 => group_depth += 1,
            4 => group_depth = group_depth.checked_sub(1).ok_or(Stop::Malformed)?,
            _ => return Err(Stop::Malformed),
        }
    }
    Ok(())
}

/// Reads one base-128 varint from the front of `bytes`.
fn varint(bytes: &mut &[u8]) -> Result<u64, Stop> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            *bytes = &bytes[i + 1..];
            return Ok(value);
        }
    }
    Err(Stop::Malformed)
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::transport::grpc::json::descriptor;
    use crate::transport::grpc::proto;

    /// A SendMessageRequest whose metadata holds a list of `n` nulls.
    fn nulls(n: usize) -> Vec<u8> {
        let null = prost_types::Value {
            kind: Some(prost_types::value::Kind::NullValue(0)),
        };
        let list = prost_types::Value {
            kind: Some(prost_types::value::Kind::ListValue(
                prost_types::ListValue {
                    values: vec![null; n],
                },
            )),
        };
        let req = proto::SendMessageRequest {
            metadata: Some(prost_types::Struct {
                fields: [("k".to_owned(), list)].into(),
            }),
            ..Default::default()
        };
        req.encode_to_vec()
    }

    #[test]
    fn counts_through_struct_list_and_value() {
        let desc = descriptor::<proto::SendMessageRequest>().unwrap();
        // metadata (1) + its map entry (1) + key (1) + value (1) + list (1) + n values,
        // each a Value (1) with its null (1).
        let fixed = 5;
        let bytes = nulls(1000);
        assert!(check(&bytes, &desc, fixed + 2000).is_ok());
        assert_eq!(
            check(&bytes, &desc, fixed + 1999),
            Err(TooManyValues {
                limit: fixed + 1999
            })
        );
    }

    #[test]
    fn unknown_fields_and_groups_count_too() {
        let desc = descriptor::<proto::SendMessageRequest>().unwrap();
        // Field 1000 as a group holding 50 varints, then the group's end.
        let mut bytes = Vec::new();
        prost::encoding::encode_key(1000, prost::encoding::WireType::StartGroup, &mut bytes);
        for _ in 0..50 {
            prost::encoding::encode_key(1, prost::encoding::WireType::Varint, &mut bytes);
            bytes.push(0);
        }
        prost::encoding::encode_key(1000, prost::encoding::WireType::EndGroup, &mut bytes);
        assert!(check(&bytes, &desc, 52).is_ok());
        assert!(check(&bytes, &desc, 51).is_err());
    }

    #[test]
    fn malformed_bytes_are_left_to_prost() {
        let desc = descriptor::<proto::SendMessageRequest>().unwrap();
        assert!(check(&[0xff; 3], &desc, 1).is_ok());
        assert!(check(&[0x0a, 0x7f, 0x00], &desc, 10).is_ok());
    }
}
