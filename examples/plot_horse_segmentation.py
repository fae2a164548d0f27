"""
Horse segmentation on superpixels
=================================

Foreground / background segmentation of Weizmann-horse photos (Borenstein & Ullman 2002), as in
the HorseSeg experiments of Shpakova et al. (2018): each photo is cut into SLIC superpixels with
colour, texture and position features; a :class:`~pmap_sklearn.MarginalPerturbMAPCRF` with the
size-balanced weighted Hamming loss (``class_weight="balanced"``) is trained on the 50 labelled
images of the fixed split and shown on test images: photo, truth, MAP and the marginal
probability of the foreground.
"""

import matplotlib.pyplot as plt
from skimage import io
from sklearn.preprocessing import StandardScaler

from pmap_sklearn import MarginalPerturbMAPCRF, NodeTransformer, weighted_hamming_loss
from pmap_sklearn.datasets import horse_split, load_weizmann_horses, paint

split = horse_split()
test = list(split.test[:12])
horses = load_weizmann_horses(indices=list(split.labeled) + test, n_jobs=2)
n_train = len(split.labeled)
scale = NodeTransformer(StandardScaler()).fit(horses.data[:n_train])
X, y = scale.transform(horses.data[:n_train]), horses.target[:n_train]
X_test, y_test = scale.transform(horses.data[n_train:]), horses.target[n_train:]

model = MarginalPerturbMAPCRF(
    "graph", class_weight="balanced", alpha=1e-2, batch_size=8, max_iter=300, random_state=0
).fit(X, y)
sizes = [sample.node_sizes for sample in X_test]
error = weighted_hamming_loss(y_test, model.predict(X_test), sizes)
print(f"weighted Hamming loss x100 on {len(test)} test images: {100 * error:.1f}")

# %%
# Photo, truth, MAP and P(foreground) of three test images.
figure, axes = plt.subplots(3, 4, figsize=(10, 6))
for row, k in enumerate((0, 3, 7)):
    segments = horses.segments[n_train + k]
    photo = io.imread(horses.filenames[n_train + k])
    panels = [
        ("photo", photo),
        ("truth", paint(segments, y_test[k])),
        ("MAP", paint(segments, model.predict(X_test[k : k + 1])[0])),
        ("P(foreground)", paint(segments, model.predict_marginals(X_test[k : k + 1])[0][:, 1])),
    ]
    for axis, (title, image) in zip(axes[row], panels, strict=True):
        axis.imshow(image, cmap=None if image.ndim == 3 else "gray", vmin=0, vmax=1)
        axis.set_title(title, fontsize=12)
        axis.axis("off")
figure.tight_layout()
plt.show()
