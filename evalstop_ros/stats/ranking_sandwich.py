"""The small-sample corrected sandwich SE of the likelihood rankings BT, Davidson and PAIRED (coverage: docs/ranking.md)."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

__all__ = ["SANDWICH_METHOD", "WorkingFit", "sandwich_standard_errors"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
#: How BT, Davidson and PAIRED obtain their SE (:func:`sandwich_standard_errors`).
SANDWICH_METHOD = "HC2 sandwich, Student t with Bell-McCaffrey df (kurtosis-adjusted)"


class WorkingFit(NamedTuple):
    """Per-comparison quantities at the optimum, for :func:`sandwich_standard_errors`."""

    scores: FloatArray  # score of each comparison in every parameter, shape (M, k)
    residual: FloatArray  # dL/dd per comparison, shape (M,)
    weight: FloatArray  # -d2L/dd2 per comparison (the GLM working weight), shape (M,)


def sandwich_standard_errors(
    info: FloatArray, fit: WorkingFit, data_i: IntArray, data_j: IntArray, n: int, seen: NDArray[np.bool_],
) -> tuple[FloatArray, FloatArray]:
    """SE and degrees of freedom of the centred scores: HC2 sandwich, Bell-McCaffrey df with a kurtosis term.

    The sandwich ``S = H^-1 K H^-1`` (Huber 1967; White 1982) stays right when the model is not:
    ties scored as half a win (BT has less variance than a Bernoulli), flipped preferences, task
    effects.  ``H`` is the observed information of the penalised objective, ``P`` the
    centring projection, SE ``= sqrt(diag(P S P))``.  Plain, ``K = sum_n s_n s_n^T`` is biased
    low in small samples: a rarely paired policy's few comparisons have high leverage and their
    residuals are shrunk towards its fit (0.90-0.92 coverage at 200 comparisons in the hard world
    of docs/ranking.md).  Two small-sample corrections, both from the linear-model literature and
    carried to the GLM by its working weights (the IRLS linearisation at the optimum; Pregibon
    1981's GLM hat matrix, Kauermann & Carroll 2001, JASA 96:1387, Sec. 3):

    * **HC2** (MacKinnon & White 1985, J. Econometrics 29:305): ``K = sum_n s_n s_n^T / (1 - h_n)``
      with the leverage ``h_n = w_n x_n^T H^-1 x_n`` of comparison ``n`` (``x_n = e_i - e_j``,
      ``w_n = -d2L/dd2``), unbiased under homoscedasticity in the linear model.
    * **Bell-McCaffrey degrees of freedom** (Bell & McCaffrey 2002, Survey Methodology 28:169;
      recommended with HC2 by Imbens & Kolesar 2016, Rev. Econ. Stat. 98:701, Sec. III): the
      HC2 variance of contrast ``c`` is ``sum_n a_n^2 e_n^2`` in the working residuals ``e = M eps``
      (``M = I - hat``); Satterthwaite's ``df = tr(M A M)^2 / tr((M A M)^2)`` with ``A = diag(a^2)``,
      which is small exactly when the contrast rests on a few high-leverage comparisons, and the
      interval uses Student's t with it.  ``tr((MAM)^2) = sum_n a_n^4 (1 - 2 h_n) + tr(H^-1 S H^-1 S)``
      with ``S = sum_n a_n^2 w_n x_n x_n^T``, so no M x M matrix is formed: O(N M + N^4).
    * **Kurtosis of the residuals in the df**: Bell and McCaffrey's df take the errors normal,
      ``Var(eps^T B eps) = 2 tr(B^2)`` for ``B = MAM``.  Preferences are bounded, a tie sitting
      between a win and a loss: their standardised kurtosis ``kappa`` is 1.4-2 in the hard world of
      docs/ranking.md, not 3, so the HC2 variance varies less than normal theory says and the
      normal-theory df are too small (coverage 0.96 at 200 comparisons, the rare policies 0.97).
      For independent errors with common kurtosis ``kappa`` the variance of a quadratic form is
      ``2 tr(B^2) + (kappa - 3) sum_n B_nn^2`` (Seber & Lee 2003, "Linear Regression Analysis",
      2nd ed., Theorem 1.6), so Satterthwaite's df become
      ``tr(B)^2 / (tr(B^2) + (kappa - 3) / 2 sum_n B_nn^2)`` with ``kappa`` estimated once, pooled
      over all comparisons, from the HC2-scaled working residuals ``e_n^2 / (w_n (1 - h_n))``
      (mean of their squares over the square of their mean; pooling heteroscedastic residuals can
      only raise it, towards smaller df).  ``B_nn = a_n^2 (1 - 2 h_n) + w_n x_n^T H^-1 S H^-1 x_n``,
      again without the M x M matrix.  With normal errors (``kappa = 3``) these are
      Bell-McCaffrey's df.

    The extras (Davidson's tie parameter) enter the sandwich but not the leverage or the df (one
    parameter over all comparisons: its leverage is ~1/M each).
    """
    inverse = np.linalg.pinv(info)
    theta_inv = inverse[:n, :n]
    x_inv_x = theta_inv[data_i, data_i] + theta_inv[data_j, data_j] - 2.0 * theta_inv[data_i, data_j]
    leverage = np.clip(fit.weight * x_inv_x, 0.0, 1.0 - 1e-9)
    scaled = fit.scores / np.sqrt(1.0 - leverage)[:, None]
    cov = (inverse @ (scaled.T @ scaled) @ inverse)[:n, :n]
    centre = np.eye(n) - 1.0 / n
    se = np.sqrt(np.clip(np.diag(centre @ cov @ centre), 0.0, None))
    # Bell-McCaffrey df of every centred contrast at once (columns = policies)
    g = theta_inv @ centre  # H^-1 c_p
    u2 = (g[data_i] - g[data_j]) ** 2  # (x_n^T H^-1 c_p)^2, shape (M, N)
    a2 = u2 * (fit.weight / (1.0 - leverage))[:, None]
    first = (u2 * fit.weight[:, None]).sum(axis=0)  # tr(M A M) = sum a_n^2 (1 - h_n)
    second = (a2**2 * (1.0 - 2.0 * leverage)[:, None]).sum(axis=0)
    m = data_i.size  # S_p = D^T diag(a_p^2 w) D for every p at once: a sparse (N^2 x M) map of the cells
    cells = np.r_[data_i * n + data_i, data_j * n + data_j, data_i * n + data_j, data_j * n + data_i]
    signs = np.r_[np.ones(2 * m), -np.ones(2 * m)]
    assemble = sparse.csr_matrix((signs, (cells, np.tile(np.arange(m), 4))), shape=(n * n, m))
    s_all = np.asarray(assemble @ (a2 * fit.weight[:, None])).reshape(n, n, n)  # [row, col, p]
    product = np.einsum("ij,jkp->ikp", theta_inv, s_all)
    second += np.einsum("ikp,kip->p", product, product)
    # kurtosis term: diag(M A M)_n = a_n^2 (1 - 2 h_n) + w_n x_n^T H^-1 S_p H^-1 x_n
    outer = np.einsum("ikp,kl->ilp", product, theta_inv)  # H^-1 S_p H^-1
    between = outer[data_i, data_i] + outer[data_j, data_j] - outer[data_i, data_j] - outer[data_j, data_i]
    diagonal = a2 * (1.0 - 2.0 * leverage)[:, None] + fit.weight[:, None] * between
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # a df past float: NaN below
        standardised = fit.residual**2 / (fit.weight * (1.0 - leverage))  # HC2-scaled squared working residuals
        kappa = float(np.mean(standardised**2) / np.mean(standardised) ** 2)
        kappa = kappa if math.isfinite(kappa) else 3.0  # all residuals zero: the normal-theory df
        variance = np.maximum(second + 0.5 * (kappa - 3.0) * (diagonal**2).sum(axis=0), np.finfo(float).tiny)
        df = np.clip(first**2 / variance, 1.0, None)
    return np.where(seen, se, np.nan), np.where(seen & np.isfinite(df), df, np.nan)
