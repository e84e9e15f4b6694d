; A Pad insertion's element-count check that z3's term rewriter spends seconds on (8 s, 4.7e9 allocations, 180k rlimit units)
(set-info :status unknown)
(declare-fun pad_67 () Int)
(declare-fun pad_71 () Int)
(declare-fun pad_68 () Int)
(declare-fun pad_72 () Int)
(declare-fun pad_69 () Int)
(declare-fun pad_73 () Int)
(declare-fun pad_70 () Int)
(declare-fun pad_74 () Int)
(assert
 (>= pad_67 0))
(assert
 (>= pad_71 0))
(assert
 (>= pad_68 0))
(assert
 (>= pad_72 0))
(assert
 (>= pad_69 0))
(assert
 (>= pad_73 0))
(assert
 (<= pad_69 13))
(assert
 (>= pad_70 0))
(assert
 (>= pad_74 0))
(assert
 (<= pad_74 13))
(assert
 (let ((?x82 (+ pad_67 pad_71)))
 (>= ?x82 (- 13))))
(assert
 (let ((?x85 (+ pad_68 pad_72)))
 (>= ?x85 0)))
(assert
 (let ((?x89 (* (- 1) pad_73)))
 (let ((?x90 (+ pad_69 ?x89)))
 (<= ?x90 13))))
(assert
 (let ((?x45 (* (- 1) pad_74)))
 (let ((?x92 (+ pad_70 ?x45)))
 (>= ?x92 (- 13)))))
(assert
 (let ((?x45 (* (- 1) pad_74)))
 (let ((?x163 (+ 14 pad_70 ?x45)))
 (let ((?x39 (* (- 1) pad_69)))
 (let ((?x126 (+ 14 ?x39 pad_73)))
 (let ((?x104 (* pad_68 pad_71)))
 (let ((?x102 (* pad_71 pad_72)))
 (let ((?x101 (* pad_67 pad_72)))
 (let ((?x98 (* pad_67 pad_68)))
 (let ((?x100 (* 14 pad_72)))
 (let ((?x97 (* 14 pad_68)))
 (let ((?x141 (+ 14 pad_67 ?x97 pad_71 ?x100 ?x98 ?x101 ?x102 ?x104)))
 (let ((?x180 (* ?x141 ?x126 ?x163)))
 (<= ?x180 4096))))))))))))))
(assert
 (>= pad_73 1))
(assert
 (<= pad_73 1))
(assert
 (>= pad_67 1))
(assert
 (<= pad_67 1))
(assert
 (= pad_68 0))
(assert
 (>= pad_70 35))
(assert
 (<= pad_70 47))
(check-sat)
