#include "tensor/storage.h"

namespace qkv {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  allocator_ = &allocator_for(device);
  data_ = allocator_->allocate(nbytes);
}

Storage::~Storage() { allocator_->deallocate(data_, nbytes_); }

}  // namespace qkv
