// Offset of batch coordinates c (outermost .. innermost) under strides s.xyz (s.w unused).
fn dot3(c: vec3<u32>, s: vec4<u32>) -> u32 {
  return c.x * s.x + c.y * s.y + c.z * s.z;
}
