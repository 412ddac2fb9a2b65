// vNPU: atb::SVector, ATB's small vector (the subset of std::vector's
// interface ATB code uses), over std::vector.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <vector>

namespace atb {

template <class T, std::size_t N = 64>
class SVector {
 public:
  SVector() = default;
  SVector(std::initializer_list<T> values) : items_(values) {}
  explicit SVector(std::size_t size, const T& value = T()) : items_(size, value) {}

  void push_back(const T& value) { items_.push_back(value); }
  void clear() { items_.clear(); }
  void resize(std::size_t size) { items_.resize(size); }
  void reserve(std::size_t size) { items_.reserve(size); }
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  T& at(std::size_t i) { return items_.at(i); }
  const T& at(std::size_t i) const { return items_.at(i); }
  T& operator[](std::size_t i) { return items_[i]; }
  const T& operator[](std::size_t i) const { return items_[i]; }
  T* data() { return items_.data(); }
  const T* data() const { return items_.data(); }
  typename std::vector<T>::iterator begin() { return items_.begin(); }
  typename std::vector<T>::iterator end() { return items_.end(); }
  typename std::vector<T>::const_iterator begin() const { return items_.begin(); }
  typename std::vector<T>::const_iterator end() const { return items_.end(); }

 private:
  std::vector<T> items_;
};

}  // namespace atb
