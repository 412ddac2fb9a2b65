/* libopapi.so: the name under which CANN code finds the aclnn operators
 * (Note [The aclnn operator API] in csrc/CMakeLists.txt). It defines
 * nothing; its dependency on libtorch_npu.so (torch_npu/_C.so) does. */
