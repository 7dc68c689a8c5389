//! `InlineVec` behaves as the `Vec` of the same items, whatever is done to
//! it and however it holds them.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use magma_protocol::{AgentDecision, InlineVec, NonEmptyString, Object, ToolCall};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Push(u8),
    Pop,
    Clear,
    Insert(usize, u8),
    Remove(usize),
    Extend(Vec<u8>),
    SetFirst(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<u8>().prop_map(Op::Push),
        2 => Just(Op::Pop),
        1 => Just(Op::Clear),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(i, x)| Op::Insert(i, x)),
        1 => any::<usize>().prop_map(Op::Remove),
        1 => prop::collection::vec(any::<u8>(), 0..3).prop_map(Op::Extend),
        1 => any::<u8>().prop_map(Op::SetFirst),
    ]
}

fn hash_of<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// Everything a reader can see of `list` is what `model` shows.
fn same(list: &InlineVec<u8>, model: &[u8]) -> Result<(), TestCaseError> {
    prop_assert_eq!(list.as_slice(), model);
    prop_assert_eq!(list.len(), model.len());
    prop_assert_eq!(list, &model.to_vec());
    prop_assert_eq!(list, model);
    prop_assert_eq!(format!("{list:?}"), format!("{model:?}"));
    prop_assert_eq!(hash_of(list), hash_of(&model.to_vec()));
    prop_assert_eq!(
        list.iter().collect::<Vec<_>>(),
        model.iter().collect::<Vec<_>>()
    );
    prop_assert_eq!(
        serde_json::to_string(list).map_err(|e| TestCaseError::fail(e.to_string()))?,
        serde_json::to_string(model).map_err(|e| TestCaseError::fail(e.to_string()))?
    );
    let owned = list.clone();
    prop_assert_eq!(&owned, list);
    let it = owned.clone().into_iter();
    prop_assert_eq!(it.len(), model.len());
    prop_assert_eq!(it.collect::<Vec<_>>(), model.to_vec());
    prop_assert_eq!(owned.clone().into_iter().rev().collect::<Vec<_>>(), {
        let mut r = model.to_vec();
        r.reverse();
        r
    });
    prop_assert_eq!(Vec::from(owned), model.to_vec());
    prop_assert_eq!(&model.iter().copied().collect::<InlineVec<u8>>(), list);
    Ok(())
}

proptest! {
    #[test]
    fn an_inline_vec_behaves_as_a_vec(start in prop::collection::vec(any::<u8>(), 0..4), ops in prop::collection::vec(op(), 0..24)) {
        // From each way of making one, through any sequence of changes.
        for mut list in [
            InlineVec::from(start.clone()),
            start.iter().copied().collect::<InlineVec<u8>>(),
            { let mut l = InlineVec::new(); l.extend(start.iter().copied()); l },
        ] {
            let mut model = start.clone();
            same(&list, &model)?;
            for op in &ops {
                match op.clone() {
                    Op::Push(x) => { list.push(x); model.push(x); }
                    Op::Pop => prop_assert_eq!(list.pop(), model.pop()),
                    Op::Clear => { list.clear(); model.clear(); }
                    Op::Insert(i, x) => {
                        let i = i % (model.len() + 1);
                        list.as_mut_vec().insert(i, x);
                        model.insert(i, x);
                    }
                    Op::Remove(i) => if !model.is_empty() {
                        let i = i % model.len();
                        prop_assert_eq!(list.as_mut_vec().remove(i), model.remove(i));
                    },
                    Op::Extend(xs) => { list.extend(xs.iter().copied()); model.extend(xs); }
                    Op::SetFirst(x) => {
                        if let (Some(a), Some(b)) = (list.first_mut(), model.first_mut()) {
                            *a = x;
                            *b = x;
                        }
                        for (a, b) in (&mut list).into_iter().zip(model.iter_mut()) {
                            *a = a.wrapping_add(1);
                            *b = b.wrapping_add(1);
                        }
                    }
                }
                same(&list, &model)?;
            }
        }
    }
}

#[test]
fn a_decision_compares_equal_however_its_calls_are_held() {
    let call = ToolCall {
        name: NonEmptyString::new("pick").expect("non-empty"),
        arguments: Object::new(),
        target_robot_name: NonEmptyString::new("panda").expect("non-empty"),
    };
    let inline = AgentDecision::call([call.clone()]);
    let in_vec = AgentDecision::call(vec![call.clone()]);
    assert_eq!(inline, in_vec);
    assert_eq!(inline.tool_calls.len(), 1);
    assert_ne!(inline, AgentDecision::call(vec![call.clone(), call]));
    assert_ne!(inline, AgentDecision::call(Vec::new()));
}
