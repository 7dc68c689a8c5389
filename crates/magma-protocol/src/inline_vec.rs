//! [`InlineVec`]: a list that holds one item without an allocation.
//!
//! GEN's decisions make one tool call and its agents record one internal
//! step per candidate, so most of these lists hold exactly one item. In a
//! `Vec` that item costs an allocation and a free; a GEN-sized coaching
//! request has two such lists in each of its steps (`docs/performance.md`,
//! run 25).

use std::fmt;
use std::hash::{Hash, Hasher};
use std::iter::FusedIterator;
use std::ops::{Deref, DerefMut};
use std::{mem, slice, vec};

/// A list that holds its only item inline and more than one in a [`Vec`].
///
/// It derefs to a slice, so it reads as a `Vec` does (`len`, `is_empty`,
/// `iter`, `first`, indexing, `iter_mut`); [`push`](InlineVec::push),
/// [`pop`](InlineVec::pop) and [`clear`](InlineVec::clear) change it in
/// place, and [`as_mut_vec`](InlineVec::as_mut_vec) gives every other `Vec`
/// method. It converts from and into a `Vec`, and from an array, and
/// compares equal to any list of the same items however each holds them:
///
/// ```
/// use magma_protocol::InlineVec;
///
/// let mut list = InlineVec::from(["a"]);
/// assert_eq!(list, vec!["a"]);
/// list.push("b");
/// list.as_mut_vec().insert(0, "z");
/// assert_eq!(list, ["z", "a", "b"]);
/// assert_eq!(list.iter().copied().collect::<String>(), "zab");
/// assert_eq!(Vec::from(list), vec!["z", "a", "b"]);
/// ```
pub struct InlineVec<T>(Repr<T>);

enum Repr<T> {
    /// Exactly one item.
    One(T),
    /// Any number; empty without an allocation.
    Many(Vec<T>),
}

impl<T> InlineVec<T> {
    /// An empty list; it does not allocate.
    pub const fn new() -> Self {
        InlineVec(Repr::Many(Vec::new()))
    }

    /// The items as a slice.
    pub fn as_slice(&self) -> &[T] {
        match &self.0 {
            Repr::One(item) => slice::from_ref(item),
            Repr::Many(items) => items,
        }
    }

    /// The items as a mutable slice.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        match &mut self.0 {
            Repr::One(item) => slice::from_mut(item),
            Repr::Many(items) => items,
        }
    }

    /// Adds `item` at the end. The first item of an empty list that has
    /// not allocated is kept inline; a second moves both into a `Vec`.
    pub fn push(&mut self, item: T) {
        match &mut self.0 {
            Repr::Many(items) if items.capacity() > 0 => items.push(item),
            Repr::Many(_) => self.0 = Repr::One(item),
            Repr::One(_) => self.as_mut_vec().push(item),
        }
    }

    /// Removes the last item and returns it, `None` when empty.
    pub fn pop(&mut self) -> Option<T> {
        match &mut self.0 {
            Repr::Many(items) => items.pop(),
            Repr::One(_) => match mem::take(&mut self.0) {
                Repr::One(item) => Some(item),
                Repr::Many(_) => None,
            },
        }
    }

    /// Removes every item, keeping a `Vec`'s allocation.
    pub fn clear(&mut self) {
        match &mut self.0 {
            Repr::Many(items) => items.clear(),
            Repr::One(_) => self.0 = Repr::Many(Vec::new()),
        }
    }

    /// The items as a `Vec`, for every change of a `Vec`'s (`insert`,
    /// `remove`, `retain`, `extend`...): an item held inline moves into a new
    /// `Vec` first, so the list keeps what that `Vec` holds.
    pub fn as_mut_vec(&mut self) -> &mut Vec<T> {
        match self.0 {
            Repr::Many(ref mut items) => items,
            Repr::One(_) => {
                if let Repr::One(item) = mem::take(&mut self.0) {
                    let mut items = Vec::with_capacity(4);
                    items.push(item);
                    self.0 = Repr::Many(items);
                }
                self.as_mut_vec()
            }
        }
    }

    /// The items as a `Vec` (allocating for an item held inline).
    pub fn into_vec(self) -> Vec<T> {
        match self.0 {
            Repr::One(item) => vec![item],
            Repr::Many(items) => items,
        }
    }
}

impl<T> Default for Repr<T> {
    fn default() -> Self {
        Repr::Many(Vec::new())
    }
}

impl<T> Default for InlineVec<T> {
    fn default() -> Self {
        InlineVec::new()
    }
}

impl<T> Deref for InlineVec<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T> DerefMut for InlineVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T> AsRef<[T]> for InlineVec<T> {
    fn as_ref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Clone> Clone for InlineVec<T> {
    fn clone(&self) -> Self {
        InlineVec(match &self.0 {
            Repr::One(item) => Repr::One(item.clone()),
            Repr::Many(items) => Repr::Many(items.clone()),
        })
    }
}

/// As the slice: `[a, b]`, the same as a `Vec`'s.
impl<T: fmt::Debug> fmt::Debug for InlineVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_slice().fmt(f)
    }
}

impl<T: PartialEq<U>, U> PartialEq<InlineVec<U>> for InlineVec<T> {
    fn eq(&self, other: &InlineVec<U>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Eq> Eq for InlineVec<T> {}

impl<T: PartialEq<U>, U> PartialEq<Vec<U>> for InlineVec<T> {
    fn eq(&self, other: &Vec<U>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: PartialEq<U>, U> PartialEq<[U]> for InlineVec<T> {
    fn eq(&self, other: &[U]) -> bool {
        self.as_slice() == other
    }
}

impl<T: PartialEq<U>, U, const N: usize> PartialEq<[U; N]> for InlineVec<T> {
    fn eq(&self, other: &[U; N]) -> bool {
        self.as_slice() == other.as_slice()
    }
}

/// As the slice, so it hashes as a `Vec` of the same items does.
impl<T: Hash> Hash for InlineVec<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

/// Keeps the `Vec` (and its allocation) as it is.
impl<T> From<Vec<T>> for InlineVec<T> {
    fn from(items: Vec<T>) -> Self {
        InlineVec(Repr::Many(items))
    }
}

/// One item is held inline, any other number in a `Vec`.
impl<T, const N: usize> From<[T; N]> for InlineVec<T> {
    fn from(items: [T; N]) -> Self {
        items.into_iter().collect()
    }
}

impl<T> From<InlineVec<T>> for Vec<T> {
    fn from(list: InlineVec<T>) -> Self {
        list.into_vec()
    }
}

/// One item is held inline, any other number in a `Vec`.
impl<T> FromIterator<T> for InlineVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut iter = iter.into_iter();
        let Some(first) = iter.next() else {
            return InlineVec::new();
        };
        let Some(second) = iter.next() else {
            return InlineVec(Repr::One(first));
        };
        let mut items = Vec::with_capacity(iter.size_hint().0.saturating_add(2));
        items.push(first);
        items.push(second);
        items.extend(iter);
        InlineVec(Repr::Many(items))
    }
}

impl<T> Extend<T> for InlineVec<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for item in iter {
            self.push(item);
        }
    }
}

impl<T> IntoIterator for InlineVec<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;

    fn into_iter(self) -> IntoIter<T> {
        IntoIter(match self.0 {
            Repr::One(item) => IterRepr::One(Some(item)),
            Repr::Many(items) => IterRepr::Many(items.into_iter()),
        })
    }
}

impl<'a, T> IntoIterator for &'a InlineVec<T> {
    type Item = &'a T;
    type IntoIter = slice::Iter<'a, T>;

    fn into_iter(self) -> slice::Iter<'a, T> {
        self.as_slice().iter()
    }
}

impl<'a, T> IntoIterator for &'a mut InlineVec<T> {
    type Item = &'a mut T;
    type IntoIter = slice::IterMut<'a, T>;

    fn into_iter(self) -> slice::IterMut<'a, T> {
        self.as_mut_slice().iter_mut()
    }
}

/// As the slice: a JSON array.
impl<T: serde::Serialize> serde::Serialize for InlineVec<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.as_slice().serialize(serializer)
    }
}

/// The owning iterator of an [`InlineVec`].
pub struct IntoIter<T>(IterRepr<T>);

enum IterRepr<T> {
    One(Option<T>),
    Many(vec::IntoIter<T>),
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        match &mut self.0 {
            IterRepr::One(item) => item.take(),
            IterRepr::Many(items) => items.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match &self.0 {
            IterRepr::One(item) => usize::from(item.is_some()),
            IterRepr::Many(items) => items.len(),
        };
        (n, Some(n))
    }
}

impl<T> DoubleEndedIterator for IntoIter<T> {
    fn next_back(&mut self) -> Option<T> {
        match &mut self.0 {
            IterRepr::One(item) => item.take(),
            IterRepr::Many(items) => items.next_back(),
        }
    }
}

impl<T> ExactSizeIterator for IntoIter<T> {}

impl<T> FusedIterator for IntoIter<T> {}

/// The items not yet taken, as a list.
impl<T: fmt::Debug> fmt::Debug for IntoIter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            IterRepr::One(item) => f.debug_list().entries(item).finish(),
            IterRepr::Many(items) => f.debug_list().entries(items.as_slice()).finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inline<T>(list: &InlineVec<T>) -> bool {
        matches!(list.0, Repr::One(_))
    }

    #[test]
    fn one_item_is_held_inline_and_more_in_a_vec() {
        let mut list = InlineVec::new();
        list.push(1);
        assert!(inline(&list), "the first push keeps the item inline");
        list.push(2);
        assert!(!inline(&list));
        assert_eq!(list, [1, 2]);
        assert!(inline(&InlineVec::from([7])));
        assert!(inline(&std::iter::once(7).collect::<InlineVec<_>>()));
        assert!(!inline(&InlineVec::from(vec![7])), "a Vec is kept as it is");
        assert!(!inline(&InlineVec::from([1, 2])));
    }

    #[test]
    fn a_vec_that_has_room_keeps_its_items() {
        // An emptied Vec keeps its allocation: pushing uses it.
        let mut list = InlineVec::from(Vec::with_capacity(8));
        list.push(1);
        assert!(!inline(&list));
        assert_eq!(list.as_mut_vec().capacity(), 8);
        // Clearing an inline item leaves an empty list that does not allocate.
        let mut list = InlineVec::from([1]);
        list.clear();
        assert!(list.is_empty());
        assert_eq!(list.as_mut_vec().capacity(), 0);
        list.push(2);
        assert!(inline(&list));
    }
}
