// The long run's chunk 2 of seed 1 (fuzz_models.py, commit 365645e), model 8: an MoE layer exported by
// torch.onnx and imported by opscope. Tapping only node_matmul_1 made IREE 3.13 fail at LLVM translation
// on its scatter-add's gather (tests/test_index_remainders.py).
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0)>
#map2 = affine_map<(d0, d1) -> (d0, 0)>
#map3 = affine_map<(d0) -> (d0, 0)>
#map4 = affine_map<(d0) -> (d0)>
#map5 = affine_map<(d0, d1, d2) -> (d1, d2)>
#map6 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
module {
  func.func @main(%arg0: tensor<13x12xf32>) -> tensor<13x3xf32> {
    %cst = arith.constant dense<[[-0.336357683, 0.217061237, -0.16137071, 0.117321052, 0.232903898, 0.24477993, -0.126393124, 0.091062121, 0.197022721, 0.283591717, -0.0298912171, -0.295925438], [-0.00847450644, 0.0361642241, -0.502148807, 0.32510975, -0.375370175, -0.0857275426, -0.264418185, -0.28852427, -0.0891895219, -0.613039851, 0.101306364, -0.0491512232]]> : tensor<2x12xf32>
    %cst_0 = arith.constant dense<[[[0.184800059, -0.226474464, 0.0665869489], [0.0746891648, -0.181834146, -0.119206078], [-0.329075575, -0.0858527049, -0.104458757], [-0.141830906, 0.00729730073, 0.0232733861], [0.0402939245, 0.151871204, 0.124319211], [-0.137457207, -0.179411948, 0.504117548], [-1.120390e-01, -0.0203886684, -0.0420111232], [-0.122650824, -3.77285724E-5, 0.135665014], [0.0501684174, 0.057667546, 0.0891502649], [0.122421764, -0.157520518, 0.17964837], [0.0145172393, 0.119114883, -0.292781979], [-0.241709083, 0.107905418, -0.0678198189]], [[0.00318925455, -6.862760e-02, -0.192053914], [0.077555567, 0.146325856, 3.471400e-01], [-0.370568961, -0.130905926, 0.123228729], [-0.0359078646, -0.154821038, 0.215165451], [0.0404742137, -0.111978531, 0.390170932], [-0.2002168, -0.181293786, 0.152554139], [-0.212582603, -0.0734200105, -0.00304036657], [-0.144394085, 0.354821175, 0.148101941], [-0.168514177, -0.0116523849, 0.0853359103], [-0.190525338, 0.334504187, -0.182024807], [0.119386978, -0.0437386893, 0.0232689884], [-0.24795942, -0.0175385382, 0.0276397541]]]> : tensor<2x12x3xf32>
    %cst_1 = arith.constant 0xFF800000 : f32
    %cst_2 = arith.constant dense<0.000000e+00> : tensor<13x2xf32>
    %c2_i64 = arith.constant 2 : i64
    %c0 = arith.constant 0 : index
    %c13 = arith.constant 13 : index
    %c0_i64 = arith.constant 0 : i64
    %cst_3 = arith.constant 0.000000e+00 : f32
    %0 = tensor.empty() : tensor<12x2xf32>
    %transposed = linalg.transpose ins(%cst : tensor<2x12xf32>) outs(%0 : tensor<12x2xf32>) permutation = [1, 0] 
    %1 = tensor.empty() : tensor<13x2xf32>
    %2 = linalg.fill ins(%cst_3 : f32) outs(%1 : tensor<13x2xf32>) -> tensor<13x2xf32>
    %3 = linalg.matmul ins(%arg0, %transposed : tensor<13x12xf32>, tensor<12x2xf32>) outs(%2 : tensor<13x2xf32>) -> tensor<13x2xf32>
    %4 = tensor.empty() : tensor<13xi64>
    %5 = linalg.fill ins(%c0_i64 : i64) outs(%4 : tensor<13xi64>) -> tensor<13xi64>
    %6 = tensor.empty() : tensor<13xf32>
    %7 = linalg.fill ins(%cst_1 : f32) outs(%6 : tensor<13xf32>) -> tensor<13xf32>
    %8:2 = linalg.generic {indexing_maps = [#map, #map1, #map1], iterator_types = ["parallel", "reduction"]} ins(%3 : tensor<13x2xf32>) outs(%7, %5 : tensor<13xf32>, tensor<13xi64>) {
    ^bb0(%in: f32, %out: f32, %out_9: i64):
      %36 = linalg.index 1 : index
      %37 = arith.index_cast %36 : index to i64
      %38 = arith.maximumf %in, %out : f32
      %39 = arith.cmpf ogt, %in, %out : f32
      %40 = arith.select %39, %37, %out_9 : i64
      linalg.yield %38, %40 : f32, i64
    } -> (tensor<13xf32>, tensor<13xi64>)
    %expanded = tensor.expand_shape %8#0 [[0, 1]] output_shape [13, 1] : tensor<13xf32> into tensor<13x1xf32>
    %9 = linalg.generic {indexing_maps = [#map, #map2, #map], iterator_types = ["parallel", "parallel"]} ins(%3, %expanded : tensor<13x2xf32>, tensor<13x1xf32>) outs(%1 : tensor<13x2xf32>) {
    ^bb0(%in: f32, %in_9: f32, %out: f32):
      %36 = arith.subf %in, %in_9 : f32
      linalg.yield %36 : f32
    } -> tensor<13x2xf32>
    %10 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%9 : tensor<13x2xf32>) outs(%1 : tensor<13x2xf32>) {
    ^bb0(%in: f32, %out: f32):
      %36 = math.exp %in : f32
      linalg.yield %36 : f32
    } -> tensor<13x2xf32>
    %11 = linalg.fill ins(%cst_3 : f32) outs(%6 : tensor<13xf32>) -> tensor<13xf32>
    %12 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]} ins(%10 : tensor<13x2xf32>) outs(%11 : tensor<13xf32>) {
    ^bb0(%in: f32, %out: f32):
      %36 = arith.addf %in, %out : f32
      linalg.yield %36 : f32
    } -> tensor<13xf32>
    %expanded_4 = tensor.expand_shape %12 [[0, 1]] output_shape [13, 1] : tensor<13xf32> into tensor<13x1xf32>
    %13 = linalg.generic {indexing_maps = [#map, #map2, #map], iterator_types = ["parallel", "parallel"]} ins(%10, %expanded_4 : tensor<13x2xf32>, tensor<13x1xf32>) outs(%1 : tensor<13x2xf32>) {
    ^bb0(%in: f32, %in_9: f32, %out: f32):
      %36 = arith.divf %in, %in_9 : f32
      linalg.yield %36 : f32
    } -> tensor<13x2xf32>
    %14 = tensor.empty() : tensor<13x2xi64>
    %15 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%14 : tensor<13x2xi64>) {
    ^bb0(%out: i64):
      %36 = linalg.index 1 : index
      %37 = arith.index_cast %36 : index to i64
      linalg.yield %37 : i64
    } -> tensor<13x2xi64>
    %16:2 = iree_linalg_ext.sort dimension(1) outs(%13, %15 : tensor<13x2xf32>, tensor<13x2xi64>) {
    ^bb0(%arg1: f32, %arg2: f32, %arg3: i64, %arg4: i64):
      %36 = arith.cmpf oge, %arg1, %arg2 : f32
      iree_linalg_ext.yield %36 : i1
    } -> tensor<13x2xf32>, tensor<13x2xi64>
    %extracted_slice = tensor.extract_slice %16#0[0, 0] [13, 1] [1, 1] : tensor<13x2xf32> to tensor<13x1xf32>
    %extracted_slice_5 = tensor.extract_slice %16#1[0, 0] [13, 1] [1, 1] : tensor<13x2xi64> to tensor<13x1xi64>
    %17 = tensor.empty() : tensor<13x1xi64>
    %18 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%extracted_slice_5 : tensor<13x1xi64>) outs(%17 : tensor<13x1xi64>) {
    ^bb0(%in: i64, %out: i64):
      %36 = arith.addi %in, %c2_i64 : i64
      linalg.yield %36 : i64
    } -> tensor<13x1xi64>
    %19 = tensor.empty() : tensor<13x1xi1>
    %20 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%extracted_slice_5 : tensor<13x1xi64>) outs(%19 : tensor<13x1xi1>) {
    ^bb0(%in: i64, %out: i1):
      %36 = arith.cmpi slt, %in, %c0_i64 : i64
      linalg.yield %36 : i1
    } -> tensor<13x1xi1>
    %21 = linalg.generic {indexing_maps = [#map, #map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%20, %18, %extracted_slice_5 : tensor<13x1xi1>, tensor<13x1xi64>, tensor<13x1xi64>) outs(%17 : tensor<13x1xi64>) {
    ^bb0(%in: i1, %in_9: i64, %in_10: i64, %out: i64):
      %36 = arith.select %in, %in_9, %in_10 : i64
      linalg.yield %36 : i64
    } -> tensor<13x1xi64>
    %22 = linalg.fill ins(%c0_i64 : i64) outs(%17 : tensor<13x1xi64>) -> tensor<13x1xi64>
    %23:3 = linalg.generic {indexing_maps = [#map3, #map3, #map4], iterator_types = ["parallel"]} outs(%22, %22, %11 : tensor<13x1xi64>, tensor<13x1xi64>, tensor<13xf32>) {
    ^bb0(%out: i64, %out_9: i64, %out_10: f32):
      %36 = linalg.index 0 : index
      %37 = arith.remsi %36, %c13 : index
      %extracted = tensor.extract %21[%37, %c0] : tensor<13x1xi64>
      %extracted_11 = tensor.extract %extracted_slice[%37, %c0] : tensor<13x1xf32>
      %38 = arith.index_cast %37 : index to i64
      linalg.yield %38, %extracted, %extracted_11 : i64, i64, f32
    } -> (tensor<13x1xi64>, tensor<13x1xi64>, tensor<13xf32>)
    %24 = linalg.fill ins(%c0_i64 : i64) outs(%14 : tensor<13x2xi64>) -> tensor<13x2xi64>
    %inserted_slice = tensor.insert_slice %23#0 into %24[0, 0] [13, 1] [1, 1] : tensor<13x1xi64> into tensor<13x2xi64>
    %inserted_slice_6 = tensor.insert_slice %23#1 into %inserted_slice[0, 1] [13, 1] [1, 1] : tensor<13x1xi64> into tensor<13x2xi64>
    %25 = iree_linalg_ext.scatter dimension_map = [0, 1] unique_indices(false) ins(%23#2, %inserted_slice_6 : tensor<13xf32>, tensor<13x2xi64>) outs(%cst_2 : tensor<13x2xf32>) {
    ^bb0(%arg1: f32, %arg2: f32):
      %36 = arith.addf %arg1, %arg2 : f32
      iree_linalg_ext.yield %36 : f32
    } -> tensor<13x2xf32>
    %26 = tensor.empty() : tensor<2x13x12xf32>
    %27 = linalg.generic {indexing_maps = [#map5, #map6], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0 : tensor<13x12xf32>) outs(%26 : tensor<2x13x12xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<2x13x12xf32>
    %28 = tensor.empty() : tensor<2x13x3xf32>
    %29 = linalg.fill ins(%cst_3 : f32) outs(%28 : tensor<2x13x3xf32>) -> tensor<2x13x3xf32>
    %30 = linalg.batch_matmul ins(%27, %cst_0 : tensor<2x13x12xf32>, tensor<2x12x3xf32>) outs(%29 : tensor<2x13x3xf32>) -> tensor<2x13x3xf32>
    %31 = linalg.generic {indexing_maps = [#map6, #map6], iterator_types = ["parallel", "parallel", "parallel"]} ins(%30 : tensor<2x13x3xf32>) outs(%28 : tensor<2x13x3xf32>) {
    ^bb0(%in: f32, %out: f32):
      %36 = arith.cmpf ugt, %in, %cst_3 : f32
      %37 = arith.select %36, %in, %cst_3 : f32
      linalg.yield %37 : f32
    } -> tensor<2x13x3xf32>
    %32 = tensor.empty() : tensor<13x2x3xf32>
    %transposed_7 = linalg.transpose ins(%31 : tensor<2x13x3xf32>) outs(%32 : tensor<13x2x3xf32>) permutation = [1, 0, 2] 
    %expanded_8 = tensor.expand_shape %25 [[0], [1, 2]] output_shape [13, 1, 2] : tensor<13x2xf32> into tensor<13x1x2xf32>
    %33 = tensor.empty() : tensor<13x1x3xf32>
    %34 = linalg.fill ins(%cst_3 : f32) outs(%33 : tensor<13x1x3xf32>) -> tensor<13x1x3xf32>
    %35 = linalg.batch_matmul ins(%expanded_8, %transposed_7 : tensor<13x1x2xf32>, tensor<13x2x3xf32>) outs(%34 : tensor<13x1x3xf32>) -> tensor<13x1x3xf32>
    %collapsed = tensor.collapse_shape %35 [[0], [1, 2]] : tensor<13x1x3xf32> into tensor<13x3xf32>
    return %collapsed : tensor<13x3xf32>
  }
}
